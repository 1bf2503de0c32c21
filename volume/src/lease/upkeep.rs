//! The config lease's upkeep, in a task of its own: every server's config
//! checked (and a lagging one brought up to date), cache nodes fenced and
//! readmitted ([`crate::fence`]).
//!
//! It used to run in the lease's refresher, between two reads of the
//! authority: a frozen or slow *other* server then held up the renewal
//! for its whole timeout, and the lease (1 s by default) ran out on a
//! healthy authority (issue 32: the bank switched off under load). Here it
//! may take as long as it likes; the renewal never waits for it.

use crate::fence::Fencer;
use super::{lease_of, publish, Shared};
use crate::rollout::{self, VolumeServers};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::time::Instant;

/// Every this many rounds (each half a lease), every server's config is
/// checked (and repaired) and fences are looked at.
pub(crate) const REPAIR_EVERY: u64 = 2;

/// Until `stop` says so (or its sender is gone): a round every half lease,
/// and at once when a server stamped an older epoch than the one held.
pub(crate) async fn run(servers: Arc<dyn VolumeServers>, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let addrs = servers.addrs();
    let mut rounds: u64 = 0;
    let mut fencer = Fencer::default();
    loop {
        let pace = lease_of(&shared.last.lock().unwrap_or_else(|p| p.into_inner())) / 2;
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep_until(Instant::now() + pace) => {}
            _ = shared.upkeep.notified() => {}
        }
        // Only what the lease holds now is repaired towards (none: the
        // authority is not answering, nothing to compare with).
        let Some(cfg) = shared.tx.borrow().clone() else { continue };
        rounds += 1;
        #[allow(clippy::manual_is_multiple_of)] // u64::is_multiple_of is newer than rust-version
        if rounds % REPAIR_EVERY == 0 {
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
