//! How a gateway holds the volume's cache config: under a lease.
//!
//! The gateway reads the config from storage server 0 (the authority) and
//! may use it for `lease_ms` counted from when it *sent* that read — a change
//! committed after the read is therefore never used-around for longer than
//! one lease. It re-reads every half lease, and at once when a storage reply
//! carries a different epoch than the one held ([`ConfigLease::stamp`]). If
//! the authority cannot be reached before the lease runs out, the config is
//! withdrawn (`None`) and the cache must be bypassed until it is back: a
//! partitioned gateway loses its cache, never its coherence.
//!
//! ```text
//!  storage replies ──stamp(server, epoch)──┐
//!                                          v
//!  refresher task ── get(0) every lease/2 ─> watch<Option<Arc<CacheConfig>>> ──> CMCache
//!        └─ every few reads, and for a server stamping an older epoch: rollout::repair
//! ```
//!
//! Servers that switch to a new config must keep the *old* epoch's keys
//! coherent (delete them on mutation) for at least one lease after the
//! switch, because a gateway may still read them until its lease runs out.

use crate::fence::Fencer;
use crate::rollout::{self, VolumeServers};
use crate::{CacheConfig, Error};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// Every this many refreshes, every server's config is checked (and repaired).
const REPAIR_EVERY: u64 = 2;

/// What a consumer sees: the config to use, or `None` = bypass the bank.
pub type Held = Option<Arc<CacheConfig>>;

struct Shared {
    /// last epoch each server stamped on a reply (0 = none seen yet)
    stamps: Vec<AtomicU64>,
    wake: Notify,
    tx: watch::Sender<Held>,
}

/// The gateway's handle on its config lease. Cheap to clone.
#[derive(Clone)]
pub struct ConfigLease {
    shared: Arc<Shared>,
}

impl ConfigLease {
    /// The config in force, or `None` while the lease has run out.
    pub fn current(&self) -> Held {
        self.shared.tx.borrow().clone()
    }

    /// A receiver that sees every change (new epoch, lease lost, regained).
    pub fn subscribe(&self) -> watch::Receiver<Held> {
        self.shared.tx.subscribe()
    }

    /// Record the epoch a storage server stamped on a reply. A different
    /// epoch than the one held wakes the refresher (newer: re-read the
    /// authority; older: that server missed a change, repair it).
    pub fn stamp(&self, server: usize, epoch: u64) {
        let Some(s) = self.shared.stamps.get(server) else { return };
        if s.swap(epoch, Ordering::Relaxed) != epoch {
            let held = self.shared.tx.borrow().as_ref().map(|c| c.epoch);
            if held != Some(epoch) {
                self.shared.wake.notify_one();
            }
        }
    }

    /// Re-read the authority now (after a change made through this gateway).
    pub fn refresh_now(&self) {
        self.shared.wake.notify_one();
    }

    /// Install a config this gateway has just committed itself, without
    /// waiting for the refresher (the lease still comes from the refresher's
    /// reads; this only publishes sooner).
    pub fn publish(&self, cfg: CacheConfig) {
        publish(&self.shared, cfg);
        self.refresh_now();
    }
}

/// Use `cfg` now if it is newer than the config held.
fn publish(shared: &Shared, cfg: CacheConfig) {
    shared.tx.send_if_modified(|h| match h {
        Some(c) if c.epoch >= cfg.epoch => false,
        _ => {
            *h = Some(Arc::new(cfg));
            true
        }
    });
}

/// Read the config from the authority (failing if it cannot be read now) and
/// keep it fresh until `shutdown` resolves.
pub async fn start(
    servers: Arc<dyn VolumeServers>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<ConfigLease, Error> {
    let sent = Instant::now();
    let first = servers.get(0).await.map_err(|e| {
        Error::Unavailable(format!("cannot read the volume config from storage server 0: {e}"))
    })?;
    let n = servers.addrs().len();
    let (tx, _) = watch::channel(Some(Arc::new(first.clone())));
    let shared = Arc::new(Shared { stamps: (0..n).map(|_| AtomicU64::new(0)).collect(), wake: Notify::new(), tx });
    let lease = ConfigLease { shared: shared.clone() };
    tokio::spawn(refresher(servers, shared, sent + lease_of(&first), shutdown));
    Ok(lease)
}

fn lease_of(c: &CacheConfig) -> Duration {
    Duration::from_millis(c.lease_ms.max(1))
}

async fn refresher(
    servers: Arc<dyn VolumeServers>,
    shared: Arc<Shared>,
    mut valid_until: Instant,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    // The last config read; kept while the lease is lost so its lease_ms
    // still paces the retries.
    let mut last: Arc<CacheConfig> = shared.tx.borrow().clone().expect("started with a config");
    let addrs = servers.addrs();
    let mut reads: u64 = 0;
    let mut fencer = Fencer::default();
    loop {
        let lease = lease_of(&last);
        let next_read = Instant::now() + lease / 2;
        let expired = shared.tx.borrow().is_none();
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next_read) => {}
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep_until(valid_until), if !expired => {
                tracing::warn!(epoch = last.epoch, "volume config lease ran out (authority unreachable): bypassing the cache");
                shared.tx.send_replace(None);
                continue;
            }
        }
        let sent = Instant::now();
        let read = tokio::time::timeout(lease, servers.get(0)).await;
        let cfg = match read {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "volume config refresh failed");
                continue;
            }
            Err(_) => continue,
        };
        valid_until = sent + lease_of(&cfg);
        let cfg = Arc::new(cfg);
        shared.tx.send_if_modified(|h| {
            let changed = h.as_ref().is_none_or(|c| **c != *cfg);
            if changed {
                if h.as_ref().is_some_and(|c| c.epoch != cfg.epoch) {
                    tracing::info!(epoch = cfg.epoch, block_size = cfg.block_size, "volume config changed");
                }
                *h = Some(cfg.clone());
            }
            changed
        });
        last = cfg.clone();
        reads += 1;
        #[allow(clippy::manual_is_multiple_of)] // u64::is_multiple_of is newer than rust-version
        if reads % REPAIR_EVERY == 0 {
            // A server that was down during a change never stamps anything
            // newer; look at every server now and then.
            if let Ok(r) = rollout::repair(servers.as_ref()).await {
                for (addr, why) in &r.lagging {
                    tracing::debug!(server = %addr, error = %why, "storage server lags the volume config");
                }
                // Fence nodes servers could not get confirmations from, and
                // readmit fenced ones that answer again (crate::fence).
                if let Some(installed) = fencer.step(servers.as_ref(), &r.installed, &r.fence_wanted).await {
                    publish(&shared, installed);
                }
            }
        }
        // Servers that stamped an older epoch missed a change: bring them up.
        for (i, s) in shared.stamps.iter().enumerate().skip(1) {
            let e = s.load(Ordering::Relaxed);
            if e != 0 && e < cfg.epoch {
                match rollout::repair_server(servers.as_ref(), i, &cfg).await {
                    Ok(()) => {
                        s.store(cfg.epoch, Ordering::Relaxed);
                        tracing::info!(server = %addrs[i], epoch = cfg.epoch, "brought a lagging server up to date");
                    }
                    Err(e) => tracing::debug!(server = %addrs[i], error = %e, "lagging server not repaired yet"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::SetOutcome;
    use async_trait::async_trait;
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    struct Fake {
        cfgs: Mutex<Vec<CacheConfig>>,
        down: AtomicBool,
    }

    #[async_trait]
    impl VolumeServers for Fake {
        fn addrs(&self) -> Vec<String> {
            (0..self.cfgs.lock().unwrap().len()).map(|i| format!("s{i}")).collect()
        }
        async fn get(&self, i: usize) -> Result<CacheConfig, String> {
            if self.down.load(Ordering::Relaxed) {
                return Err("down".into());
            }
            Ok(self.cfgs.lock().unwrap()[i].clone())
        }
        async fn propose(&self, i: usize, new: &CacheConfig) -> Result<SetOutcome, String> {
            let mut g = self.cfgs.lock().unwrap();
            if crate::acceptable(&g[i], new).is_err() {
                return Ok(SetOutcome::Stale(g[i].clone()));
            }
            g[i] = new.clone();
            Ok(SetOutcome::Installed)
        }
    }

    fn fake() -> Arc<Fake> {
        let c = CacheConfig { lease_ms: 100, ..Default::default() };
        Arc::new(Fake { cfgs: Mutex::new(vec![c.clone(), c]), down: AtomicBool::new(false) })
    }

    #[tokio::test(start_paused = true)]
    async fn picks_up_a_change_within_the_lease() {
        let f = fake();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        let mut rx = lease.subscribe();
        let t0 = Instant::now();
        rollout::rollout(f.as_ref(), CacheConfig { block_size: 4096, ..f.get(0).await.unwrap() }).await.unwrap();
        rx.changed().await.unwrap();
        assert_eq!(rx.borrow().as_ref().unwrap().epoch, 2);
        assert!(t0.elapsed() <= Duration::from_millis(100), "took {:?}", t0.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_newer_stamp_triggers_an_immediate_refresh() {
        let f = fake();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        let mut rx = lease.subscribe();
        rollout::rollout(f.as_ref(), CacheConfig { block_size: 4096, ..f.get(0).await.unwrap() }).await.unwrap();
        let t0 = Instant::now();
        lease.stamp(1, 2);
        rx.changed().await.unwrap();
        assert!(t0.elapsed() < Duration::from_millis(10), "took {:?}", t0.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn lease_runs_out_when_the_authority_is_unreachable_and_comes_back() {
        let f = fake();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        let mut rx = lease.subscribe();
        let t0 = Instant::now();
        f.down.store(true, Ordering::Relaxed);
        rx.changed().await.unwrap();
        assert!(rx.borrow().is_none(), "config withdrawn");
        assert!(t0.elapsed() <= Duration::from_millis(100), "withdrawn within the lease ({:?})", t0.elapsed());
        f.down.store(false, Ordering::Relaxed);
        rx.changed().await.unwrap();
        assert_eq!(rx.borrow().as_ref().unwrap().epoch, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_missed_a_change_is_repaired() {
        let f = fake();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        // Server 1 misses three changes (installed on the authority only).
        for (epoch, block_size) in [(2, 4096), (3, 8192), (4, 16384)] {
            let next = CacheConfig { epoch, block_size, ..f.get(0).await.unwrap() };
            assert_eq!(f.propose(0, &next).await.unwrap(), SetOutcome::Installed);
        }
        let _ = lease;
        tokio::time::sleep(Duration::from_millis(50 * REPAIR_EVERY + 20)).await;
        assert_eq!(f.get(1).await.unwrap(), f.get(0).await.unwrap(), "stepped to the authority's epoch and config");
    }
}
