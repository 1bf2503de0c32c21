//! Fencing cache nodes that cannot confirm updates, and letting them back.
//!
//! A storage server acknowledges a mutation only once every cache node it
//! touched has confirmed the change. A node that is frozen or cut off can
//! neither confirm nor be proven empty, so SMCache asks for it to be
//! *fenced*: the request rides on the server's `GetVolumeConfig` replies,
//! which every gateway reads once per lease ([`rollout::repair`], run by
//! [`crate::lease`]). The first gateway to see it moves the node from
//! `nodes` to `fenced` under a new epoch (compare-and-set on the authority, so gateways racing to do the
//! same agree); the waiting mutation then outwaits the old epoch's lease and
//! is answered. Nothing the fenced node holds is readable after that.
//!
//! ```text
//!  SMCache: update not confirmed ─> FenceRequests ─> GetVolumeConfig reply ─┐
//!  gateway lease (every lease): repair() collects requests ─> Fencer::step ─┴─> rollout(nodes - X, fenced + X)
//!                               fenced node answers READMIT_AFTER probes ─> flush_all ─> rollout(nodes + X)
//! ```
//!
//! A fenced node that answers again is put back after a probation (so a
//! node that is merely overloaded does not flap in and out, each time
//! costing the bank a new epoch), flushed first: its old keys are
//! unreadable under the new epoch anyway, but they would waste its memory.

use crate::probe;
use crate::rollout::{self, VolumeServers};
use crate::CacheConfig;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// The cache nodes a storage server wants fenced: SMCache could not get an
/// update confirmed by them before its deadline, so it may not acknowledge
/// the mutation until no gateway can read their keys any more. Gateways
/// read this list with the volume config (`GetVolumeConfig`) and move the
/// nodes to [`CacheConfig::fenced`] under a new epoch.
#[derive(Default, Debug)]
pub struct FenceRequests(Mutex<BTreeSet<String>>);

impl FenceRequests {
    pub fn want(&self, node: &str) {
        self.0.lock().unwrap().insert(node.to_string());
    }

    /// The requests still open under `config` (a node no longer in its pool
    /// is fenced already, or removed: its request is done).
    pub fn open(&self, config: &CacheConfig) -> Vec<String> {
        let mut g = self.0.lock().unwrap();
        g.retain(|n| config.nodes.contains(n));
        g.iter().cloned().collect()
    }
}

/// Consecutive answered probes (one per lease) before a fenced node is readmitted.
pub const READMIT_AFTER: u32 = 3;

/// A probe slower than this counts as no answer (short: the lease
/// refresher waits for the probes before its next read).
const PROBE_DEADLINE: Duration = Duration::from_millis(200);

/// One gateway's view of the fenced nodes' probation.
#[derive(Default)]
pub struct Fencer {
    answered: HashMap<String, u32>,
}

impl Fencer {
    /// Fence the nodes servers asked for (`wanted`) that `cfg` still uses,
    /// and readmit fenced nodes that have answered long enough. Returns the
    /// config installed, if this gateway changed it.
    pub async fn step(&mut self, servers: &dyn VolumeServers, cfg: &CacheConfig, wanted: &[String]) -> Option<CacheConfig> {
        let fence: Vec<&String> = cfg.nodes.iter().filter(|n| wanted.contains(n)).collect();
        if !fence.is_empty() {
            let mut next = cfg.clone();
            next.nodes.retain(|n| !fence.contains(&n));
            next.fenced.extend(fence.iter().map(|n| n.to_string()));
            return match rollout::rollout(servers, next).await {
                Ok(r) => {
                    tracing::warn!(nodes = ?fence, epoch = r.installed.epoch,
                        "fenced cache nodes that could not confirm an update (they rejoin once they answer again)");
                    Some(r.installed)
                }
                Err(e) => {
                    tracing::debug!(error = %e, "fencing not installed by this gateway (another may have)");
                    None
                }
            };
        }
        self.answered.retain(|n, _| cfg.fenced.contains(n));
        let probes = futures::future::join_all(cfg.fenced.iter().map(|n| async move {
            let ok = probe::memcached_version(n, PROBE_DEADLINE).await.is_ok();
            (n, ok)
        }))
        .await;
        let mut ready = Vec::new();
        for (n, ok) in probes {
            let count = self.answered.entry(n.clone()).or_default();
            *count = if ok { *count + 1 } else { 0 };
            if *count >= READMIT_AFTER && probe::memcached_flush_all(n, PROBE_DEADLINE).await.is_ok() {
                ready.push(n.clone());
            }
        }
        if ready.is_empty() {
            return None;
        }
        let mut next = cfg.clone();
        next.fenced.retain(|n| !ready.contains(n));
        next.nodes.extend(ready.iter().cloned());
        match rollout::rollout(servers, next).await {
            Ok(r) => {
                tracing::info!(nodes = ?ready, epoch = r.installed.epoch, "fenced cache nodes answer again: flushed and readmitted");
                for n in &ready {
                    self.answered.remove(n);
                }
                Some(r.installed)
            }
            Err(e) => {
                tracing::debug!(error = %e, "readmission not installed by this gateway (another may have)");
                None
            }
        }
    }
}
