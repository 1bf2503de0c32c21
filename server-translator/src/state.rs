//! The bank and key layout in force, following the volume config.
//!
//! When the config changes (new epoch), the previous layout is kept for one
//! lease: gateways may still read the old epoch's keys until their lease
//! runs out, so mutations keep deleting those too (see `admin::lease`).

use cache_bank::{Bank, BankOptions, Keys};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use xlator::volume::CacheConfig;

pub struct Layout {
    pub config: CacheConfig,
    pub bank: Arc<Bank>,
    pub keys: Keys,
}

pub struct Layouts {
    rx: watch::Receiver<CacheConfig>,
    cur: Mutex<(u64, Option<Arc<Layout>>)>,
    prev: Mutex<Option<(Arc<Layout>, Instant)>>,
}

fn usable(c: &CacheConfig) -> bool {
    !c.nodes.is_empty() && c.block_size >= 256 && c.block_size.is_power_of_two()
}

impl Layouts {
    pub fn new(rx: watch::Receiver<CacheConfig>) -> Layouts {
        Layouts { rx, cur: Mutex::new((0, None)), prev: Mutex::new(None) }
    }

    /// The layout to use now; `None` = no cache for this volume.
    pub fn current(&self) -> Option<Arc<Layout>> {
        let cfg = self.rx.borrow();
        let mut cur = self.cur.lock().unwrap();
        if cur.0 == cfg.epoch && cur.0 != 0 {
            return cur.1.clone();
        }
        let old = cur.1.take();
        let next = usable(&cfg).then(|| {
            // keep connections when only the block size or epoch changed
            let bank = match &old {
                Some(o) if o.config.nodes == cfg.nodes && o.config.placement == cfg.placement => o.bank.clone(),
                _ => Arc::new(Bank::new(
                    &cfg.nodes,
                    cfg.placement,
                    BankOptions { timeout: Duration::from_millis(cfg.timeout_ms.max(1)), ..Default::default() },
                )),
            };
            Arc::new(Layout { keys: Keys::from_config(&cfg), config: cfg.clone(), bank })
        });
        if let Some(o) = old {
            let lease = Duration::from_millis(o.config.lease_ms.max(cfg.lease_ms)) + Duration::from_millis(100);
            *self.prev.lock().unwrap() = Some((o, Instant::now() + lease));
        }
        tracing::info!(epoch = cfg.epoch, nodes = ?cfg.nodes, block_size = cfg.block_size, "SMCache layout");
        *cur = (cfg.epoch, next.clone());
        next
    }

    /// The layout replaced less than a lease ago, whose keys gateways may
    /// still read.
    pub fn previous(&self) -> Option<Arc<Layout>> {
        let mut p = self.prev.lock().unwrap();
        match &*p {
            Some((l, until)) if Instant::now() < *until => Some(l.clone()),
            Some(_) => {
                *p = None;
                None
            }
            None => None,
        }
    }
}
