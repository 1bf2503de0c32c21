//! THE check of a config: every rule of the options table, against what the
//! checker knows of the cluster ([`Limits`], `limits.rs`). One function for every entry
//! point, so a config one of them accepts no other refuses for a reason of
//! its own:
//!
//! ```text
//!  admin API PUT / cache-nodes ─┐  (limits: the gateway's stripe unit, the nodes' item limit)
//!  imca mount --cache-nodes ────┤  (limits: the nodes' item limit)
//!  imca storage --volume … ─────┼─> validate(config, limits)
//!  SetVolumeConfig (raw RPC) ───┤  (limits: Limits::UNKNOWN — a storage server
//!  volume.json at load ─────────┘   knows neither the stripe unit nor the nodes)
//!  CMCache / SMCache ─────────────> usable(config): may the bank be used under it?
//! ```
//!
//! Validation runs on the whole proposed config before anything is sent
//! anywhere, so a refused change changes nothing.

use crate::options::{check_block_size, table};
use crate::limits::Limits;
use crate::{name, CacheConfig, Invalid};

/// Check a whole config against every rule of the options table; the
/// error names the first option that breaks one, and why.
pub fn validate(cfg: &CacheConfig, limits: &Limits) -> Result<(), Invalid> {
    table().iter().try_for_each(|o| (o.rule)(cfg, limits))
}

/// May CMCache and SMCache use the bank under `cfg`? It needs nodes, a
/// block size the rules allow and a name the keys can carry verbatim.
/// Configs reach the translators validated; this guards the layout (and
/// the keys) against one that was not, without repeating any rule.
pub fn usable(cfg: &CacheConfig) -> bool {
    !cfg.nodes.is_empty()
        && check_block_size(cfg.block_size, &Limits::UNKNOWN).is_ok()
        && name::check_name(&cfg.volume).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{check_node_addr, MIN_BLOCK_SIZE};

    fn refusal(cfg: &CacheConfig, limits: &Limits) -> (&'static str, String) {
        let e = validate(cfg, limits).unwrap_err();
        (e.field, e.message)
    }

    #[test]
    fn the_default_config_is_valid_everywhere() {
        validate(&CacheConfig::default(), &Limits::default()).unwrap();
        validate(&CacheConfig::default(), &Limits::UNKNOWN).unwrap();
    }

    #[test]
    fn block_size_refusals_name_the_field_and_the_reason() {
        let with = |b| CacheConfig { block_size: b, ..Default::default() };
        for (b, why) in [(3000, "not a power of two"), (128, "below the minimum"), (1 << 20, "item limit")] {
            assert_eq!(refusal(&with(b), &Limits::default()).0, "block_size");
            assert!(refusal(&with(b), &Limits::default()).1.contains(why), "{b}");
        }
        let small_stripe = Limits { stripe_unit: Some(64 * 1024), ..Limits::default() };
        assert!(refusal(&with(128 * 1024), &small_stripe).1.contains("stripe unit"));
        for b in [MIN_BLOCK_SIZE, 4096, 128 * 1024] {
            validate(&with(b), &Limits::default()).unwrap();
        }
    }

    #[test]
    fn a_storage_server_checks_only_what_it_can_know() {
        // Blocks beyond a default memcached item, on nodes started with a
        // larger -I, set through a gateway with a large stripe unit: fine.
        let big = CacheConfig { block_size: 1 << 20, ..Default::default() };
        validate(&big, &Limits::UNKNOWN).unwrap();
        let gateway = Limits { stripe_unit: Some(4 << 20), item_limit: Some(2 << 20), ..Limits::default() };
        validate(&big, &gateway).unwrap();
        // The rules that need no cluster knowledge hold everywhere.
        let odd = CacheConfig { block_size: 1000, ..Default::default() };
        assert_eq!(refusal(&odd, &Limits::UNKNOWN).0, "block_size");
    }

    #[test]
    fn ranges_come_from_the_table() {
        let t = CacheConfig { timeout_ms: 0, ..Default::default() };
        assert_eq!(refusal(&t, &Limits::UNKNOWN), ("timeout_ms", "timeout_ms 0 is outside 1 ..= 60000".into()));
        let l = CacheConfig { lease_ms: 1, ..Default::default() };
        assert_eq!(refusal(&l, &Limits::UNKNOWN), ("lease_ms", "lease_ms 1 is outside 50 ..= 600000".into()));
    }

    #[test]
    fn node_addresses_duplicates_and_fences() {
        for ok in ["127.0.0.1:11211", "cache-3.example:11211", "[::1]:11211", "unix:/run/imca/cn0.sock"] {
            check_node_addr(ok).unwrap();
        }
        for bad in ["127.0.0.1", "host:0", "host:99999", ":11211", "a b:1", "::1:11211", "unix:relative.sock", "unix:"] {
            let e = check_node_addr(bad).unwrap_err();
            assert_eq!(e.field, "addr", "{bad}");
            assert!(e.message.contains(bad), "{bad}: {e}");
        }
        let twice = CacheConfig { nodes: vec!["a:1".into(), "a:1".into()], ..Default::default() };
        assert_eq!(refusal(&twice, &Limits::UNKNOWN).0, "nodes");
        assert!(refusal(&twice, &Limits::UNKNOWN).1.contains("twice"));
        let junk = CacheConfig { nodes: vec!["junk".into()], ..Default::default() };
        assert_eq!(refusal(&junk, &Limits::UNKNOWN).0, "addr");
        let both = CacheConfig { nodes: vec!["a:1".into()], fenced: vec!["a:1".into()], ..Default::default() };
        assert_eq!(refusal(&both, &Limits::UNKNOWN).0, "fenced");
    }

    #[test]
    fn volume_names_follow_the_one_rule() {
        let named = |v: &str| CacheConfig { volume: v.into(), ..Default::default() };
        validate(&named("a.b"), &Limits::UNKNOWN).unwrap();
        validate(&named("a_b"), &Limits::UNKNOWN).unwrap();
        let (field, why) = refusal(&named("a b"), &Limits::UNKNOWN);
        assert_eq!(field, "volume");
        assert!(why.contains("' '"), "{why}");
        assert_eq!(refusal(&named(&"v".repeat(49)), &Limits::UNKNOWN).0, "volume");
    }

    #[test]
    fn the_first_broken_rule_in_table_order_is_reported() {
        let two = CacheConfig { block_size: 1024, timeout_ms: 0, lease_ms: 0, ..Default::default() };
        assert_eq!(refusal(&two, &Limits::default()).0, "timeout_ms");
    }

    #[test]
    fn usable_means_nodes_a_valid_block_size_and_a_key_safe_name() {
        let good = CacheConfig { nodes: vec!["a:1".into()], ..Default::default() };
        assert!(usable(&good));
        assert!(!usable(&CacheConfig::default()), "no nodes");
        assert!(!usable(&CacheConfig { block_size: 1000, ..good.clone() }));
        assert!(!usable(&CacheConfig { block_size: MIN_BLOCK_SIZE / 2, ..good.clone() }));
        assert!(!usable(&CacheConfig { volume: "a b".into(), ..good.clone() }));
        // block sizes the server accepts but a gateway may not: still usable
        // (CMCache separately declines blocks that span two servers)
        assert!(usable(&CacheConfig { block_size: 1 << 20, ..good }));
    }
}
