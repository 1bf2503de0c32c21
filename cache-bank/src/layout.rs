//! What a bank user needs under one volume config: the keys of its epoch and
//! block size, and a bank over its nodes with its placement. Built here, and
//! only here, for CMCache (gateway) and SMCache (storage server) alike.
//!
//! ```text
//!  CacheConfig (epoch e) ──LayoutSlot::follow──> Layout { keys(volume, e, block size), bank(nodes, placement) }
//!                                                       │ same nodes and placement as before: same bank,
//!                                                       └ so a block-size or epoch change keeps the connections
//! ```
//!
//! `nodes` never holds a fenced node (fencing moves it to `fenced`; the
//! options table refuses a node in both), so the bank is simply `nodes`.

use crate::{Bank, BankOptions, Keys};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use volume::CacheConfig;

/// The keys and bank in force under `config`.
pub struct Layout {
    pub config: CacheConfig,
    pub keys: Keys,
    pub bank: Arc<Bank>,
}

impl Layout {
    /// The layout for `cfg`, or `None` when the bank cannot be used under it
    /// (no nodes, or a config the rules refuse: `volume::usable`). Reuses
    /// `prev`'s bank, and so its connections, when the pool and the
    /// placement are the same. A new bank gets `base` (the daemon's
    /// transport and bank metrics) with `timeout` as its read timeout,
    /// `None` = the config's `timeout_ms`.
    pub fn build(
        cfg: &CacheConfig,
        prev: Option<&Layout>,
        base: &BankOptions,
        timeout: Option<Duration>,
    ) -> Option<Layout> {
        if !volume::usable(cfg) {
            return None;
        }
        let bank = match prev {
            Some(p) if p.config.nodes == cfg.nodes && p.config.placement == cfg.placement => p.bank.clone(),
            _ => {
                let timeout = timeout.unwrap_or(Duration::from_millis(cfg.timeout_ms.max(1)));
                Arc::new(Bank::new(&cfg.nodes, cfg.placement, BankOptions { timeout, ..base.clone() }))
            }
        };
        Some(Layout { config: cfg.clone(), keys: Keys::from_config(cfg), bank })
    }
}

/// The layout in force, rebuilt when (and only when) the epoch changes: a
/// translator asks on every operation, so the common answer is one
/// comparison.
#[derive(Default)]
pub struct LayoutSlot {
    /// (epoch it was built for, the layout or None = no cache then)
    cur: Mutex<Option<(u64, Option<Arc<Layout>>)>>,
    /// what every bank built here starts from (see [`Layout::build`])
    bank: BankOptions,
}

impl LayoutSlot {
    /// A slot whose banks get `bank` (the daemon's `--transport` and bank
    /// metrics); `default()` = TCP, metrics counted but not exported.
    pub fn new(bank: BankOptions) -> LayoutSlot {
        LayoutSlot { cur: Mutex::new(None), bank }
    }

    /// The layout for `cfg`. When the epoch changed with this call,
    /// `on_change(replaced)` runs before any other caller gets the new
    /// layout (under the slot's lock): SMCache records the replaced layout
    /// there, so no mutation can use the new one and miss the old one's keys.
    pub fn follow(
        &self,
        cfg: &CacheConfig,
        timeout: Option<Duration>,
        on_change: impl FnOnce(Option<Arc<Layout>>),
    ) -> Option<Arc<Layout>> {
        let mut cur = self.cur.lock().unwrap();
        if let Some((epoch, l)) = &*cur {
            if *epoch == cfg.epoch {
                return l.clone();
            }
        }
        let replaced = cur.take().and_then(|(_, l)| l);
        let now = Layout::build(cfg, replaced.as_deref(), &self.bank, timeout).map(Arc::new);
        on_change(replaced);
        *cur = Some((cfg.epoch, now.clone()));
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volume::Placement;

    fn cfg(epoch: u64, nodes: &[&str]) -> CacheConfig {
        CacheConfig { epoch, nodes: nodes.iter().map(|n| n.to_string()).collect(), ..Default::default() }
    }

    /// follow, returning also what on_change saw (None: not called).
    fn follow(slot: &LayoutSlot, c: &CacheConfig) -> (Option<Arc<Layout>>, Option<Option<Arc<Layout>>>) {
        let mut seen = None;
        let now = slot.follow(c, None, |r| seen = Some(r));
        (now, seen)
    }

    #[tokio::test]
    async fn rebuilt_per_epoch_keeping_the_bank_when_the_pool_stays() {
        let slot = LayoutSlot::default();
        let (a, seen) = follow(&slot, &cfg(1, &["127.0.0.1:1"]));
        assert!(matches!(seen, Some(None)), "first layout: a change, nothing replaced");
        let a = a.unwrap();
        assert_eq!(a.bank.options().timeout, Duration::from_millis(volume::DEFAULT_BANK_TIMEOUT_MS));
        let (again, seen) = follow(&slot, &cfg(1, &["127.0.0.1:1"]));
        assert!(seen.is_none() && Arc::ptr_eq(&again.unwrap(), &a));
        let (b, seen) = follow(&slot, &CacheConfig { block_size: 4096, ..cfg(2, &["127.0.0.1:1"]) });
        assert!(Arc::ptr_eq(&seen.flatten().unwrap(), &a));
        let b = b.unwrap();
        assert!(Arc::ptr_eq(&b.bank, &a.bank), "same pool and placement: same bank");
        assert_ne!(b.keys, a.keys);
        let (c, _) = follow(&slot, &CacheConfig { placement: Placement::Crc32, ..cfg(3, &["127.0.0.1:1"]) });
        assert!(!Arc::ptr_eq(&c.unwrap().bank, &b.bank), "placement changed: new bank");
    }

    #[tokio::test]
    async fn no_layout_without_nodes_or_under_a_config_the_rules_refuse() {
        let slot = LayoutSlot::default();
        assert!(follow(&slot, &cfg(1, &[])).0.is_none());
        let bad_block = CacheConfig { block_size: 1000, ..cfg(2, &["127.0.0.1:1"]) };
        assert!(follow(&slot, &bad_block).0.is_none());
        let bad_name = CacheConfig { volume: "a b".into(), ..cfg(3, &["127.0.0.1:1"]) };
        assert!(follow(&slot, &bad_name).0.is_none());
        let ok = slot.follow(&cfg(4, &["127.0.0.1:1"]), Some(Duration::from_secs(3)), |_| {});
        assert_eq!(ok.unwrap().bank.options().timeout, Duration::from_secs(3), "the override wins");
    }
}
