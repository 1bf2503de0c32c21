//! The bank and key layout in force, following the volume config.
//!
//! When the config changes (new epoch), the replaced layout is kept for one
//! lease: gateways may still read the old epoch's keys until their lease
//! runs out, so mutations keep deleting those too (see `admin::lease`).
//! Every layout replaced less than a lease ago is kept, not just the last:
//! two changes within one lease (a fence, then a re-admission) leave two
//! epochs that gateways may still read.

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
    /// replaced layouts, each with the instant its lease runs out
    prev: Mutex<Vec<(Arc<Layout>, Instant)>>,
}

fn usable(c: &CacheConfig) -> bool {
    !c.nodes.is_empty() && c.block_size >= 256 && c.block_size.is_power_of_two()
}

impl Layouts {
    pub fn new(rx: watch::Receiver<CacheConfig>) -> Layouts {
        Layouts { rx, cur: Mutex::new((0, None)), prev: Mutex::new(Vec::new()) }
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
            self.prev.lock().unwrap().push((o, Instant::now() + lease));
        }
        tracing::info!(epoch = cfg.epoch, nodes = ?cfg.nodes, block_size = cfg.block_size, "SMCache layout");
        *cur = (cfg.epoch, next.clone());
        next
    }

    /// The layouts replaced less than a lease ago, whose keys gateways may
    /// still read, each with the instant that stops.
    pub fn previous(&self) -> Vec<(Arc<Layout>, Instant)> {
        let mut p = self.prev.lock().unwrap();
        let now = Instant::now();
        p.retain(|(_, until)| now < *until);
        p.clone()
    }

    /// Wait until the config in force satisfies `ok`, up to `give_up`.
    pub async fn wait_for(&self, ok: impl Fn(&CacheConfig) -> bool, give_up: Instant) -> bool {
        let mut rx = self.rx.clone();
        loop {
            if ok(&rx.borrow_and_update()) {
                return true;
            }
            match tokio::time::timeout_at(give_up.into(), rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// Sleep until no replaced layout can be read by any gateway.
    pub async fn outwait_previous(&self) {
        if let Some(last) = self.previous().iter().map(|(_, until)| *until).max() {
            tokio::time::sleep_until(last.into()).await;
        }
    }
}
