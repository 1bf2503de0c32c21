//! The volume's cache options in one table (GlusterFS-style): name, type,
//! range, default, description, whether a change may set it, and the rule
//! its value must follow. The rules are what [`crate::validate`] runs, so
//! every entry point checks the same thing (admin API, `imca mount`,
//! `imca storage` flags, SetVolumeConfig, `volume.json` at load); the rest
//! is served at `GET /api/v1/options` and printed by `imca ctl options`.

use crate::config::{DEFAULT_BANK_TIMEOUT_MS, DEFAULT_BLOCK_SIZE, DEFAULT_LEASE_MS, DEFAULT_VOLUME};
use crate::name::{check_name, MAX_NAME_LEN, NAME_CHARS};
use crate::limits::Limits;
use crate::{CacheConfig, Invalid};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::LazyLock;

/// Smallest data block: below this the per-item overhead of memcached
/// (key + header, ~100 B) dominates and the dissertation measured losses.
pub const MIN_BLOCK_SIZE: u32 = 256;
pub const MIN_TIMEOUT_MS: u64 = 1;
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// A lease shorter than this would make every gateway re-read the config
/// from the authority several times per request burst.
pub const MIN_LEASE_MS: u64 = 50;
pub const MAX_LEASE_MS: u64 = 600_000;

/// The rule of one option, over the whole config (some rules relate two
/// options, e.g. `fenced` and `nodes`) and the cluster's [`Limits`].
pub type Rule = fn(&CacheConfig, &Limits) -> Result<(), Invalid>;

#[derive(Clone, Debug, Serialize)]
pub struct OptionSpec {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub range: String,
    pub default: String,
    /// can be changed through PUT /api/v1/config
    pub settable: bool,
    pub description: &'static str,
    /// what a value must satisfy; [`crate::validate`] runs every row's
    #[serde(skip)]
    pub rule: Rule,
}

/// Every option of a volume's cache configuration, in display order (which
/// is also the order the rules run in, so the first problem is reported).
pub fn table() -> &'static [OptionSpec] {
    &TABLE
}

static TABLE: LazyLock<Vec<OptionSpec>> = LazyLock::new(|| {
    vec![
        OptionSpec {
            name: "block_size",
            ty: "bytes (power of two)",
            range: format!("{MIN_BLOCK_SIZE} ..= min(stripe unit, cache item limit)"),
            default: DEFAULT_BLOCK_SIZE.to_string(),
            settable: true,
            description: "size of the data blocks kept in the bank; must divide the stripe unit so a block \
                          never spans two storage servers",
            rule: |c, l| check_block_size(c.block_size, l),
        },
        OptionSpec {
            name: "placement",
            ty: "enum",
            range: "consistent | crc32 | modulo".into(),
            default: "consistent".into(),
            settable: true,
            description: "how keys map to cache nodes: ketama consistent hashing (a pool change moves ~1/M \
                          of the keys), crc32 mod M (the dissertation's default) or modulo (consecutive blocks \
                          of a file round-robin over nodes: throughput mode)",
            // the type admits only the three values (serde refuses others)
            rule: |_, _| Ok(()),
        },
        OptionSpec {
            name: "timeout_ms",
            ty: "milliseconds",
            range: format!("{MIN_TIMEOUT_MS} ..= {MAX_TIMEOUT_MS}"),
            default: DEFAULT_BANK_TIMEOUT_MS.to_string(),
            settable: true,
            description: "a bank request slower than this counts as a miss",
            rule: |c, _| in_range("timeout_ms", c.timeout_ms, MIN_TIMEOUT_MS, MAX_TIMEOUT_MS),
        },
        OptionSpec {
            name: "lease_ms",
            ty: "milliseconds",
            range: format!("{MIN_LEASE_MS} ..= {MAX_LEASE_MS}"),
            default: DEFAULT_LEASE_MS.to_string(),
            settable: true,
            description: "gateways re-read the config at least this often; bounds how long a change takes \
                          to reach every gateway",
            rule: |c, _| in_range("lease_ms", c.lease_ms, MIN_LEASE_MS, MAX_LEASE_MS),
        },
        OptionSpec {
            name: "nodes",
            ty: "list of host:port",
            range: "reachable memcached-compatible nodes".into(),
            default: "[] (no cache)".into(),
            settable: true,
            description: "the cache-node pool; usually changed with POST/DELETE /api/v1/cache-nodes",
            rule: |c, _| {
                let mut seen = HashSet::new();
                for n in &c.nodes {
                    check_node_addr(n)?;
                    if !seen.insert(n.as_str()) {
                        return Err(Invalid::new("nodes", format!("cache node {n} is listed twice")));
                    }
                }
                Ok(())
            },
        },
        OptionSpec {
            name: "fenced",
            ty: "list of host:port",
            range: "nodes not in `nodes`".into(),
            default: "[]".into(),
            settable: true,
            description: "cache nodes kept out of the pool because they could not confirm an update; \
                          readmitted automatically once they answer again (or by listing them in `nodes`)",
            rule: |c, _| match c.fenced.iter().find(|f| c.nodes.contains(f)) {
                Some(n) => Err(Invalid::new("fenced", format!("cache node {n} cannot be both in the pool and fenced"))),
                None => Ok(()),
            },
        },
        OptionSpec {
            name: "volume",
            ty: "string",
            range: format!("1 ..= {MAX_NAME_LEN} characters of {NAME_CHARS}; fixed at volume creation"),
            default: DEFAULT_VOLUME.into(),
            settable: false,
            description: "volume name, used verbatim in every cache key so several volumes can share a bank",
            rule: |c, _| check_name(&c.volume).map_err(|m| Invalid::new("volume", m)),
        },
        OptionSpec {
            name: "epoch",
            ty: "integer",
            range: "bumped by every change".into(),
            default: "1".into(),
            settable: false,
            description: "part of every cache key; a PUT may include the epoch it was based on \
                          (compare-and-set: 409 if the volume moved on)",
            // any value: the authority's compare-and-set decides which epoch wins
            rule: |_, _| Ok(()),
        },
    ]
});

fn in_range(field: &'static str, v: u64, min: u64, max: u64) -> Result<(), Invalid> {
    if (min..=max).contains(&v) {
        Ok(())
    } else {
        Err(Invalid::new(field, format!("{field} {v} is outside {min} ..= {max}")))
    }
}

/// The `block_size` rule: a power of two, at least [`MIN_BLOCK_SIZE`],
/// within the cache item limit and dividing the stripe unit (when known).
pub fn check_block_size(b: u32, limits: &Limits) -> Result<(), Invalid> {
    let err = |m: String| Err(Invalid::new("block_size", m));
    if !b.is_power_of_two() {
        return err(format!("block_size {b} is not a power of two"));
    }
    if b < MIN_BLOCK_SIZE {
        return err(format!("block_size {b} is below the minimum of {MIN_BLOCK_SIZE} bytes"));
    }
    if let Some(item_limit) = limits.item_limit {
        let max_item = item_limit.saturating_sub(limits.value_overhead);
        if b > max_item {
            return err(format!(
                "block_size {b} exceeds the cache item limit: items are at most {item_limit} bytes, {} of which \
                 are key and header, so blocks can be at most {max_item} bytes",
                limits.value_overhead
            ));
        }
    }
    #[allow(clippy::manual_is_multiple_of)] // u32::is_multiple_of is newer than rust-version
    if let Some(unit) = limits.stripe_unit.filter(|u| u % b != 0) {
        return err(format!(
            "block_size {b} does not divide the stripe unit ({unit} bytes): a block would span two storage servers"
        ));
    }
    Ok(())
}

/// A cache-node address: `host:port` with a non-zero port; the host may be
/// a name or an IP (IPv6 in brackets); or `unix:/path` for a node on this
/// host listening on a UNIX socket. Reachability is checked separately
/// (`crate::probe`), only when a node joins.
pub fn check_node_addr(addr: &str) -> Result<(), Invalid> {
    let bad = |m: &str| Err(Invalid::new("addr", format!("cache node address {addr:?} {m}")));
    // `unix:/path`: a node on this host listening on a UNIX socket (`-s`)
    if let Some(path) = addr.strip_prefix("unix:") {
        return if path.starts_with('/') && path.len() < 108 && !path.contains(char::is_whitespace) {
            Ok(())
        } else {
            bad("is not unix:/absolute/path (at most 107 bytes, no spaces)")
        };
    }
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
    use std::collections::BTreeSet;

    #[test]
    fn every_config_field_has_exactly_one_row() {
        let fields: BTreeSet<String> =
            serde_json::to_value(CacheConfig::default()).unwrap().as_object().unwrap().keys().cloned().collect();
        let rows: Vec<&str> = table().iter().map(|o| o.name).collect();
        assert_eq!(rows.iter().map(|r| r.to_string()).collect::<BTreeSet<_>>(), fields);
        assert_eq!(rows.len(), fields.len(), "a name twice: {rows:?}");
    }

    #[test]
    fn defaults_shown_are_the_config_defaults() {
        let d = serde_json::to_value(CacheConfig::default()).unwrap();
        for o in table() {
            let shown = match &d[o.name] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                _ => continue, // lists: described in words
            };
            assert_eq!(o.default, shown, "{}", o.name);
        }
    }

    #[test]
    fn the_served_row_has_no_rule_in_it() {
        let v = serde_json::to_value(&table()[0]).unwrap();
        let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, BTreeSet::from(["name", "type", "range", "default", "settable", "description"]));
    }

    #[test]
    fn only_the_identity_of_a_volume_is_not_settable() {
        let fixed: Vec<&str> = table().iter().filter(|o| !o.settable).map(|o| o.name).collect();
        assert_eq!(fixed, ["volume", "epoch"]);
    }
}
