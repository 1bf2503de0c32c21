//! How a gateway holds the volume's cache config: under a lease.
//!
//! The gateway reads the config from storage server 0 (the authority) and
//! may use it for `lease_ms` counted from when it *sent* that read — a change
//! committed after the read is therefore never used-around for longer than
//! one lease. It re-reads a third into each lease, retries a failed read
//! every tenth of a lease (so a read lost to a busy machine is made up for
//! long before the lease runs out), and re-reads at once when a storage
//! reply carries a different epoch than the one held ([`ConfigLease::stamp`]).
//! If the authority cannot be reached before the lease runs out, the config
//! is withdrawn (`None`) and the cache must be bypassed until it is back: a
//! partitioned gateway loses its cache, never its coherence. The lease's
//! own clock runs while a read is under way: a read still pending at the
//! end of the lease does not stretch it.
//!
//! ```text
//!  storage replies ──stamp(server, epoch)──┐
//!                                          v
//!  renewer task ── renew() a third into the lease, retried ─> watch<Option<Arc<CacheConfig>>> ──> CMCache
//!  upkeep task (lease/upkeep.rs) ── every half lease: rollout::repair, fences, lagging servers
//!  bypass episodes (crate::bypass): start and end logged, counted ──> ConfigLease::bypass
//! ```
//!
//! The renewal does nothing else: the repairs and fences, which talk to
//! every server and may wait out a frozen one's timeout, run in their own
//! task (`upkeep`), and the gateway reads the authority over a connection
//! of its own ([`VolumeServers::renew`]), not queued behind bulk data.
//!
//! Servers that switch to a new config must keep the *old* epoch's keys
//! coherent (delete them on mutation) for at least one lease after the
//! switch, because a gateway may still read them until its lease runs out.

use crate::bypass::{Bypass, Episodes};
use crate::rollout::VolumeServers;
use crate::{CacheConfig, Error};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

mod upkeep;

/// What a consumer sees: the config to use, or `None` = bypass the bank.
pub type Held = Option<Arc<CacheConfig>>;

pub(crate) struct Shared {
    /// last epoch each server stamped on a reply (0 = none seen yet)
    pub(crate) stamps: Vec<AtomicU64>,
    /// re-read the authority now
    wake: Notify,
    /// look at the servers now (one stamped an older epoch)
    pub(crate) upkeep: Notify,
    pub(crate) tx: watch::Sender<Held>,
    /// the last config read, kept while the lease is lost so its lease_ms
    /// still paces the retries
    pub(crate) last: Mutex<Arc<CacheConfig>>,
    bypass: Episodes,
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

    /// [`ConfigLease::bypass`] for a task that must not keep the lease
    /// alive (the gateway's metrics follow the lease until it is gone).
    pub fn bypass_reader(&self) -> impl Fn() -> Option<Bypass> + Send + Sync + 'static {
        let weak = Arc::downgrade(&self.shared);
        move || weak.upgrade().map(|s| s.bypass.snapshot())
    }

    /// The last config read from the authority, held or not (for status
    /// while the lease has run out).
    pub fn last_read(&self) -> Arc<CacheConfig> {
        self.shared.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// When, how often and how long the bank was bypassed.
    pub fn bypass(&self) -> Bypass {
        self.shared.bypass.snapshot()
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
                self.shared.upkeep.notify_one();
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
pub(crate) fn publish(shared: &Shared, cfg: CacheConfig) {
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
    let first = servers.renew().await.map_err(|e| {
        Error::Unavailable(format!("cannot read the volume config from storage server 0: {e}"))
    })?;
    let n = servers.addrs().len();
    let first = Arc::new(first);
    let (tx, _) = watch::channel(Some(first.clone()));
    let shared = Arc::new(Shared {
        stamps: (0..n).map(|_| AtomicU64::new(0)).collect(),
        wake: Notify::new(),
        upkeep: Notify::new(),
        tx,
        last: Mutex::new(first.clone()),
        bypass: Episodes::default(),
    });
    let lease = ConfigLease { shared: shared.clone() };
    // The upkeep stops when the renewer does (it drops `stop`).
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(upkeep::run(servers.clone(), shared.clone(), stopped));
    tokio::spawn(async move {
        renewer(servers, shared, sent + lease_of(&first), shutdown).await;
        drop(stop);
    });
    Ok(lease)
}

pub(crate) fn lease_of(c: &CacheConfig) -> Duration {
    Duration::from_millis(c.lease_ms.max(1))
}

/// A renewal starts this far into the lease: the rest leaves room for
/// retries on a busy machine.
fn renew_after(lease: Duration) -> Duration {
    lease / 3
}

/// A failed renewal is tried again this soon.
fn retry_after(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_millis(1))
}

fn bypassing(shared: &Shared) -> bool {
    shared.tx.borrow().is_none()
}

/// The lease ran out: withdraw the config (an episode starts).
fn run_out(shared: &Shared) {
    let epoch = shared.last.lock().unwrap_or_else(|p| p.into_inner()).epoch;
    // (counted first: whoever watches `tx` reads the count when it moves)
    shared.bypass.start(epoch);
    shared.tx.send_replace(None);
}

async fn renewer(servers: Arc<dyn VolumeServers>, shared: Arc<Shared>, mut valid_until: Instant, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut next_read = Instant::now() + renew_after(lease_of(&shared.last.lock().unwrap_or_else(|p| p.into_inner())));
    loop {
        let lease = lease_of(&shared.last.lock().unwrap_or_else(|p| p.into_inner()));
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep_until(next_read) => {}
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep_until(valid_until), if !bypassing(&shared) => {
                run_out(&shared);
                continue;
            }
        }
        let sent = Instant::now();
        let read = tokio::time::timeout(lease, servers.renew());
        tokio::pin!(read);
        // The lease keeps its own time while the read is under way.
        let read = loop {
            tokio::select! {
                _ = &mut shutdown => return,
                r = &mut read => break r,
                _ = tokio::time::sleep_until(valid_until), if !bypassing(&shared) => run_out(&shared),
            }
        };
        let cfg = match read {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "volume config renewal failed; retrying");
                next_read = Instant::now() + retry_after(lease);
                continue;
            }
            Err(_) => {
                tracing::debug!("volume config renewal timed out; retrying");
                next_read = Instant::now() + retry_after(lease);
                continue;
            }
        };
        valid_until = sent + lease_of(&cfg);
        next_read = sent + renew_after(lease_of(&cfg));
        let cfg = Arc::new(cfg);
        *shared.last.lock().unwrap_or_else(|p| p.into_inner()) = cfg.clone();
        // (the episode ends before `tx` moves, as it starts in `run_out`)
        shared.bypass.end(cfg.epoch);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::{self, SetOutcome};
    use super::upkeep::REPAIR_EVERY;
    use async_trait::async_trait;
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    struct Fake {
        cfgs: Mutex<Vec<CacheConfig>>,
        down: AtomicBool,
        /// how long a read of server i takes (a loaded machine, a frozen server)
        delays: Mutex<Vec<Duration>>,
        /// the next this many renewals fail (after their delay)
        busy: std::sync::atomic::AtomicU32,
        /// when each successful renewal was sent
        renewed: Mutex<Vec<Instant>>,
    }

    #[async_trait]
    impl VolumeServers for Fake {
        fn addrs(&self) -> Vec<String> {
            (0..self.cfgs.lock().unwrap().len()).map(|i| format!("s{i}")).collect()
        }
        async fn get(&self, i: usize) -> Result<CacheConfig, String> {
            let delay = self.delays.lock().unwrap()[i];
            tokio::time::sleep(delay).await;
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
        async fn renew(&self) -> Result<CacheConfig, String> {
            let sent = Instant::now();
            let c = self.get(0).await?;
            if self.busy.load(Ordering::Relaxed) > 0 {
                self.busy.fetch_sub(1, Ordering::Relaxed);
                return Err("busy".into());
            }
            self.renewed.lock().unwrap().push(sent);
            Ok(c)
        }
    }

    fn fake() -> Arc<Fake> {
        let c = CacheConfig { lease_ms: 100, ..Default::default() };
        Arc::new(Fake {
            cfgs: Mutex::new(vec![c.clone(), c]),
            down: AtomicBool::new(false),
            delays: Mutex::new(vec![Duration::ZERO; 2]),
            busy: Default::default(),
            renewed: Mutex::default(),
        })
    }

    const LEASE: Duration = Duration::from_millis(100);

    /// The longest the lease went between two renewals (from the start).
    fn longest_gap(f: &Fake, start: Instant) -> Duration {
        let r = f.renewed.lock().unwrap();
        std::iter::once(start).chain(r.iter().copied()).zip(r.iter().copied()).map(|(a, b)| b - a).max().unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_delayed_by_load_still_renews_before_expiry() {
        let f = fake();
        let t0 = Instant::now();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        // A loaded machine: every read of the authority takes a fifth of
        // the lease, and the first renewal is lost.
        f.delays.lock().unwrap()[0] = LEASE / 5;
        f.busy.store(1, Ordering::Relaxed);
        tokio::time::sleep(LEASE * 20).await;
        assert_eq!(lease.bypass().episodes, 0, "the lease never ran out");
        assert!(lease.current().is_some());
        let gap = longest_gap(&f, t0);
        assert!(gap < LEASE, "renewed before expiry every time (longest gap {gap:?})");
        assert!(f.renewed.lock().unwrap().len() >= 40, "a renewal every third of a lease");
    }

    #[tokio::test(start_paused = true)]
    async fn a_frozen_server_does_not_hold_up_the_renewal() {
        let f = fake();
        let t0 = Instant::now();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        // Server 1 (not the authority) answers only after ten leases: the
        // upkeep's checks of every server wait for it, the renewal must not.
        f.delays.lock().unwrap()[1] = LEASE * 10;
        tokio::time::sleep(LEASE * 50).await;
        let gap = longest_gap(&f, t0);
        assert!(gap <= LEASE / 3 + Duration::from_millis(1), "renewed a third into every lease (longest gap {gap:?})");
        assert_eq!(lease.bypass().episodes, 0, "the lease never ran out");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bypass_is_counted_from_start_to_end() {
        let f = fake();
        let lease = start(f.clone(), std::future::pending()).await.unwrap();
        f.down.store(true, Ordering::Relaxed);
        tokio::time::sleep(LEASE * 3).await;
        let during = lease.bypass();
        assert_eq!(during.episodes, 1);
        let current = during.current.expect("bypassing now");
        assert!(current >= LEASE && current <= LEASE * 3, "since the lease ran out: {current:?}");
        f.down.store(false, Ordering::Relaxed);
        tokio::time::sleep(LEASE).await;
        let after = lease.bypass();
        assert_eq!(after.current, None, "the cache is back");
        assert_eq!(after.episodes, 1);
        assert!(after.total >= current && after.total == after.ended, "{after:?}");
        // A second episode counts on.
        f.down.store(true, Ordering::Relaxed);
        tokio::time::sleep(LEASE * 2).await;
        f.down.store(false, Ordering::Relaxed);
        tokio::time::sleep(LEASE).await;
        assert_eq!(lease.bypass().episodes, 2);
        assert!(lease.bypass().total > after.total);
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
