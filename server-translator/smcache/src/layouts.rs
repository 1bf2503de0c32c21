//! The bank and key layout in force, following the volume config.
//!
//! When the config changes (new epoch), the replaced layout is kept for one
//! lease: gateways may still read the old epoch's keys until their lease
//! runs out, so mutations keep deleting those too (see `volume::lease`).
//! Every layout replaced less than a lease ago is kept, not just the last:
//! two changes within one lease (a fence, then a re-admission) leave two
//! epochs that gateways may still read.

use cache_bank::{BankOptions, LayoutSlot};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use volume::CacheConfig;

/// Built by cache-bank, as CMCache's is.
pub use cache_bank::Layout;

pub struct Layouts {
    rx: watch::Receiver<CacheConfig>,
    cur: LayoutSlot,
    /// replaced layouts, each with the instant its lease runs out
    prev: Mutex<Vec<(Arc<Layout>, Instant)>>,
}

impl Layouts {
    /// `bank`: the options of every bank built here (the daemon's transport
    /// and bank metrics; the timeout comes from the config).
    pub fn new(rx: watch::Receiver<CacheConfig>, bank: BankOptions) -> Layouts {
        Layouts { rx, cur: LayoutSlot::new(bank), prev: Mutex::new(Vec::new()) }
    }

    /// The layout to use now; `None` = no cache for this volume.
    pub fn current(&self) -> Option<Arc<Layout>> {
        let cfg = self.rx.borrow();
        // Recorded before any mutation can get the new layout, so every
        // mutation that uses it also deletes the replaced epoch's keys.
        self.cur.follow(&cfg, None, |replaced| {
            if let Some(o) = replaced {
                let lease = Duration::from_millis(o.config.lease_ms.max(cfg.lease_ms)) + Duration::from_millis(100);
                self.prev.lock().unwrap().push((o, Instant::now() + lease));
            }
            tracing::info!(epoch = cfg.epoch, nodes = ?cfg.nodes, block_size = cfg.block_size, "SMCache layout");
        })
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
