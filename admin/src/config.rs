//! A config change: parse (unknown fields refused), merge onto the current
//! config, validate against the options table and the cluster's limits.
//! Validation runs on the whole proposed config before anything is sent to
//! any server, so a refused request changes nothing.

use crate::backend::AdminError;
use crate::options::*;
use serde::{Deserialize, Serialize};
use xlator::volume::{CacheConfig, Placement};

/// memcached's default item size limit (`-I 1m`).
pub const DEFAULT_ITEM_LIMIT: u32 = 1024 * 1024;
/// Room a block item needs beyond its data: the key (≤ 250 B), the value
/// header (valid length, checksum) and memcached's own item header.
pub const DEFAULT_VALUE_OVERHEAD: u32 = 512;
/// The stripe unit when the gateway does not say otherwise (DESIGN.md).
pub const DEFAULT_STRIPE_UNIT: u32 = 128 * 1024;

/// What the cluster imposes on a config, beyond the options table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// the stripe translator's unit; block_size must divide it
    pub stripe_unit: u32,
    /// largest item a cache node stores (memcached `-I`)
    pub item_limit: u32,
    /// bytes of an item that are not block data
    pub value_overhead: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            stripe_unit: DEFAULT_STRIPE_UNIT,
            item_limit: DEFAULT_ITEM_LIMIT,
            value_overhead: DEFAULT_VALUE_OVERHEAD,
        }
    }
}

/// `PUT /api/v1/config`: every field optional; absent fields keep their value.
/// A client may PUT back what it GOT: `epoch` then acts as compare-and-set and
/// `volume` must be unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// nodes kept out of the pool (see `admin::fence`); an operator may
    /// clear it, and a node listed in `nodes` leaves it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

impl ConfigUpdate {
    /// Parse a request body; serde's message names the unknown field or the
    /// bad value ("unknown field `blocksize`, expected one of ...").
    pub fn from_json(body: &[u8]) -> Result<ConfigUpdate, AdminError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(AdminError::BadRequest { field: None, message: "empty body: expected a JSON object".into() });
        }
        serde_json::from_slice(body).map_err(|e| AdminError::BadRequest {
            field: unknown_field(&e.to_string()),
            message: format!("invalid config: {e}"),
        })
    }

    /// The config that results from applying this update to `current`; the
    /// epoch stays `current.epoch` (the backend bumps it when installing).
    pub fn merge(&self, current: &CacheConfig) -> Result<CacheConfig, AdminError> {
        if let Some(e) = self.epoch {
            if e != current.epoch {
                return Err(AdminError::Conflict(format!(
                    "config changed meanwhile: request is based on epoch {e}, volume is at epoch {}",
                    current.epoch
                )));
            }
        }
        if let Some(v) = &self.volume {
            if *v != current.volume {
                return Err(AdminError::bad("volume", format!("volume name is fixed (\"{}\")", current.volume)));
            }
        }
        let mut next = current.clone();
        if let Some(f) = &self.fenced {
            next.fenced = f.clone();
        }
        if let Some(n) = &self.nodes {
            next.nodes = n.clone();
            if self.fenced.is_none() {
                // readmitting a fenced node by hand (a new epoch makes
                // whatever it still holds unreadable)
                next.fenced.retain(|f| !n.contains(f));
            }
        }
        if let Some(b) = self.block_size {
            next.block_size = b;
        }
        if let Some(p) = self.placement {
            next.placement = p;
        }
        if let Some(t) = self.timeout_ms {
            next.timeout_ms = t;
        }
        if let Some(l) = self.lease_ms {
            next.lease_ms = l;
        }
        Ok(next)
    }
}

fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Check a whole proposed config. Reports the first problem, naming the field.
pub fn validate(cfg: &CacheConfig, limits: &Limits) -> Result<(), AdminError> {
    validate_block_size(cfg.block_size, limits)?;
    if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&cfg.timeout_ms) {
        return Err(AdminError::bad(
            "timeout_ms",
            format!("timeout_ms {} is outside {MIN_TIMEOUT_MS} ..= {MAX_TIMEOUT_MS}", cfg.timeout_ms),
        ));
    }
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&cfg.lease_ms) {
        return Err(AdminError::bad(
            "lease_ms",
            format!("lease_ms {} is outside {MIN_LEASE_MS} ..= {MAX_LEASE_MS}", cfg.lease_ms),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for n in &cfg.nodes {
        validate_node_addr(n)?;
        if !seen.insert(n.as_str()) {
            return Err(AdminError::bad("nodes", format!("cache node {n} is listed twice")));
        }
    }
    if let Some(n) = cfg.fenced.iter().find(|f| cfg.nodes.contains(f)) {
        return Err(AdminError::bad("fenced", format!("cache node {n} cannot be both in the pool and fenced")));
    }
    Ok(())
}

pub fn validate_block_size(b: u32, limits: &Limits) -> Result<(), AdminError> {
    let err = |m: String| Err(AdminError::bad("block_size", m));
    if !b.is_power_of_two() {
        return err(format!("block_size {b} is not a power of two"));
    }
    if b < MIN_BLOCK_SIZE {
        return err(format!("block_size {b} is below the minimum of {MIN_BLOCK_SIZE} bytes"));
    }
    let max_item = limits.item_limit.saturating_sub(limits.value_overhead);
    if b > max_item {
        return err(format!(
            "block_size {b} exceeds the cache item limit: items are at most {} bytes, {} of which are key and header, \
             so blocks can be at most {max_item} bytes",
            limits.item_limit, limits.value_overhead
        ));
    }
    #[allow(clippy::manual_is_multiple_of)] // u32::is_multiple_of is newer than rust-version
    if limits.stripe_unit % b != 0 {
        return err(format!(
            "block_size {b} does not divide the stripe unit ({} bytes): a block would span two storage servers",
            limits.stripe_unit
        ));
    }
    Ok(())
}

/// `host:port` with a non-zero port; the host may be a name or an IP
/// (IPv6 in brackets). Reachability is checked separately (a probe).
pub fn validate_node_addr(addr: &str) -> Result<(), AdminError> {
    let bad = |m: &str| Err(AdminError::bad("addr", format!("cache node address {addr:?} {m}")));
    let Some((host, port)) = addr.rsplit_once(':') else {
        return bad("is not host:port");
    };
    if host.is_empty() || host.contains(char::is_whitespace) || (host.contains(':') && !host.starts_with('[')) {
        return bad("has no valid host");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => bad("has no valid port (1..=65535)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits::default()
    }

    #[test]
    fn block_size_rules_name_the_problem() {
        let msg = |b| validate_block_size(b, &lim()).unwrap_err().to_string();
        assert!(msg(3000).contains("not a power of two"));
        assert!(msg(128).contains("below the minimum"));
        assert!(msg(1 << 20).contains("item limit"));
        let small_stripe = Limits { stripe_unit: 64 * 1024, ..lim() };
        assert!(validate_block_size(128 * 1024, &small_stripe).unwrap_err().to_string().contains("stripe unit"));
        for b in [256, 4096, 128 * 1024] {
            validate_block_size(b, &lim()).unwrap();
        }
    }

    #[test]
    fn unknown_fields_are_refused_and_named() {
        let e = ConfigUpdate::from_json(br#"{"blocksize": 4096}"#).unwrap_err();
        assert_eq!(e, AdminError::BadRequest { field: Some("blocksize".into()), message: e.to_string() });
        assert!(e.to_string().contains("blocksize"));
        let e = ConfigUpdate::from_json(br#"{"placement": "random"}"#).unwrap_err();
        assert!(e.to_string().contains("random"), "{e}");
    }

    #[test]
    fn merge_keeps_absent_fields_and_checks_epoch_and_volume() {
        let cur = CacheConfig { epoch: 7, ..Default::default() };
        let up = ConfigUpdate::from_json(br#"{"block_size": 4096}"#).unwrap();
        let next = up.merge(&cur).unwrap();
        assert_eq!(next.block_size, 4096);
        assert_eq!(next.epoch, 7);
        assert_eq!(next.placement, cur.placement);
        let stale = ConfigUpdate { epoch: Some(6), ..Default::default() };
        assert!(matches!(stale.merge(&cur), Err(AdminError::Conflict(_))));
        let rename = ConfigUpdate { volume: Some("other".into()), ..Default::default() };
        assert!(matches!(rename.merge(&cur), Err(AdminError::BadRequest { .. })));
    }

    #[test]
    fn node_addresses() {
        for ok in ["127.0.0.1:11211", "cache-3.example:11211", "[::1]:11211"] {
            validate_node_addr(ok).unwrap();
        }
        for bad in ["127.0.0.1", "host:0", "host:99999", ":11211", "a b:1", "::1:11211"] {
            assert!(validate_node_addr(bad).is_err(), "{bad}");
        }
        let twice = CacheConfig { nodes: vec!["a:1".into(), "a:1".into()], ..Default::default() };
        assert!(validate(&twice, &lim()).unwrap_err().to_string().contains("twice"));
    }
}
