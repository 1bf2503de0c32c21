//! The heal index: names an operation left differing between the servers,
//! recorded when it happens, for the background heal ([`crate::healer`]).
//!
//! ```text
//!  unlink / rmdir / rename / link / create / chmod … failed on a follower
//!      (or its rollback failed, or server 0 answered EIO)
//!      ──> record (parent, name) ──> wake the healer
//!  healer ──> snapshot ──> heal_name ──> done: remove │ not yet: keep, back off
//! ```
//!
//! GlusterFS's self-heal daemon works from an index its bricks keep of the
//! files an operation left needing a heal; here the gateway that saw the
//! failure keeps it (docs/design.md, "Servers repair themselves": the
//! trade-off against keeping it on server 0). Only a failure records, so the
//! path that succeeds pays nothing. The index is bounded: past
//! [`MAX_PENDING`] names nothing more is recorded and a full sweep (the walk
//! `imca heal` runs) is owed instead.

use crate::metrics::Metrics;
use std::collections::HashMap;
use std::sync::Mutex;
use xlator::Loc;

/// Most names the index holds (a path is at most a few KiB: a few tens of
/// MiB at worst; a handful in practice).
pub const MAX_PENDING: usize = 16 * 1024;

pub(crate) struct Pending {
    inner: Mutex<Inner>,
    wake: tokio::sync::Notify,
    pub(crate) metrics: Metrics,
}

#[derive(Default)]
struct Inner {
    /// (parent path, name) → where the parent is, and failed heal attempts
    names: HashMap<(String, String), (Loc, u32)>,
    /// the index overflowed: a full sweep is owed
    sweep: bool,
}

/// One recorded name.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub parent: Loc,
    pub name: String,
}

impl Pending {
    pub fn new(metrics: Metrics) -> Pending {
        Pending { inner: Mutex::new(Inner::default()), wake: tokio::sync::Notify::new(), metrics }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Record that servers may disagree about `parent/name` after `op`.
    pub fn record(&self, op: &str, parent: &Loc, name: &str) {
        {
            let mut g = self.lock();
            let key = (parent.path.clone(), name.to_string());
            if let Some(e) = g.names.get_mut(&key) {
                e.1 = 0;
            } else if g.names.len() < MAX_PENDING {
                g.names.insert(key, (parent.clone(), 0));
            } else if !g.sweep {
                g.sweep = true;
                self.metrics.sweep_needed.set(1);
                tracing::error!(
                    op,
                    path = %parent.child(name).path,
                    "stripe heal: more than {MAX_PENDING} names wait for a heal; recording no more, a full sweep will run once the servers answer"
                );
            }
            self.metrics.pending.set(g.names.len() as i64);
        }
        self.wake.notify_one();
    }

    /// Record the name of the object at `path` (a setattr's Loc): its
    /// parent is found by path. The root has no name to heal.
    pub fn record_path(&self, op: &str, path: &str) {
        if path.is_empty() {
            return;
        }
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let parent = if dir.is_empty() { Loc::root() } else { Loc::new(dir, None) };
        self.record(op, &parent, name);
    }

    /// Up to `max` recorded names, left in the index.
    pub fn snapshot(&self, max: usize) -> Vec<Item> {
        let g = self.lock();
        g.names.iter().take(max).map(|((_, name), (parent, _))| Item { parent: parent.clone(), name: name.clone() }).collect()
    }

    /// The name agrees on every server now: out of the index.
    pub fn healed(&self, it: &Item) {
        let mut g = self.lock();
        g.names.remove(&(it.parent.path.clone(), it.name.clone()));
        self.metrics.pending.set(g.names.len() as i64);
    }

    /// A heal attempt failed; how many have for this name since recorded.
    pub fn failed(&self, it: &Item) -> u32 {
        let mut g = self.lock();
        match g.names.get_mut(&(it.parent.path.clone(), it.name.clone())) {
            Some(e) => {
                e.1 += 1;
                e.1
            }
            None => 0,
        }
    }

    pub fn len(&self) -> usize {
        self.lock().names.len()
    }

    pub fn sweep_owed(&self) -> bool {
        self.lock().sweep
    }

    pub fn sweep_done(&self) {
        self.lock().sweep = false;
        self.metrics.sweep_needed.set(0);
    }

    /// Resolves once something is recorded (at once if something was
    /// recorded since the last wait).
    pub async fn recorded(&self) {
        self.wake.notified().await
    }
}
