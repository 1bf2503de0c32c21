//! The locks this gateway's owners were granted, kept to ask them back when
//! a storage server restarted (its lock table starts empty), and the ones
//! that could not be: reported to their owner, never dropped silently.
//!
//! ```text
//!  setlk granted / any unlock ──> Granted::note  (same range rules as the server's table)
//!  poll of server i answers "fresh" (it does not know this session: restarted),
//!  or renews a lease that had run out (this gateway was frozen or cut off)
//!        ──> reclaim(i): for each file ordered by server i, each lock held:
//!              Reclaim{fid, lock} ──> granted (in the server's grace)
//!                                 └─> refused or unanswered: the owner's locks on the
//!                                     file are lost: unlocked there, forgotten here,
//!                                     its next lock call on the file fails with EIO,
//!                                     `imca_gateway_locks_lost_total`, a warning
//! ```
//!
//! A file's reclaim must not cross the owners' own calls on it (an unlock
//! sent just before a stale reclaim of the same range would leave the lock
//! held): each call on a file holds its guard shared for one round trip,
//! the file's reclaim holds it exclusively. Guards are striped over files
//! (a fixed number, no memory per file).

use prometheus::{IntCounter, IntCounterVec, Registry};
use protocol_client::ProtocolClient;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio::sync::RwLock;
use xlator::lock_table::{FileLocks, Holder};
use xlator::{FileId, Loc, Lock, LockKind, LockType, Translator, LOCK_TO_EOF};

/// Guards (files whose calls may wait on each other's reclaim).
const GUARDS: usize = 64;
/// Owners whose loss waits to be reported at once (past it, a warning only).
pub const MAX_LOST: usize = 65536;

#[derive(Default)]
struct State {
    /// per inode: its file id, and what its owners hold (this gateway is the
    /// one session: holders differ by owner only)
    files: HashMap<u64, (FileId, FileLocks)>,
    /// (inode, owner) whose locks were lost, until its next lock call
    lost: HashSet<(u64, u64)>,
}

pub struct Granted {
    state: Mutex<State>,
    guards: Vec<RwLock<()>>,
    /// storage servers (which one orders a file: `stripe::layout`)
    servers: usize,
    lost_total: IntCounter,
    reclaims: IntCounterVec,
}

fn holder(owner: u64) -> Holder {
    Holder { session: 0, owner }
}

impl Granted {
    pub fn new(servers: usize) -> Granted {
        Granted {
            state: Mutex::default(),
            guards: (0..GUARDS).map(|_| RwLock::new(())).collect(),
            servers: servers.max(1),
            lost_total: metric_series::counter("imca_gateway_locks_lost_total", "Lock owners whose locks on a file a restarted storage server did not give back (their next lock call on it fails with EIO)"),
            reclaims: metric_series::counter_vec("imca_gateway_lock_reclaims_total", "Locks asked back from restarted storage servers, by outcome (granted, lost)", &["outcome"]),
        }
    }

    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.lost_total.clone()))?;
        registry.register(Box::new(self.reclaims.clone()))
    }

    /// The guard of inode `ino`'s calls (see the module page).
    pub fn guard(&self, ino: u64) -> &RwLock<()> {
        &self.guards[(ino % GUARDS as u64) as usize]
    }

    /// `lock` was granted (or, an unlock, sent: what it drops is not asked
    /// back whatever the answer) on file `fid`, inode `ino`.
    pub fn note(&self, ino: u64, fid: Option<FileId>, lock: &Lock) {
        let mut st = self.state.lock().unwrap();
        if lock.typ == LockType::Unlock {
            if let Some((_, f)) = st.files.get_mut(&ino) {
                f.set(holder(lock.owner), lock);
                if f.is_empty() {
                    st.files.remove(&ino);
                }
            }
            return;
        }
        let Some(fid) = fid else { return };
        st.files.entry(ino).or_insert_with(|| (fid, FileLocks::default())).1.set(holder(lock.owner), lock);
    }

    /// Whether `owner` lost its locks on `ino` since its last lock call (it
    /// is told once: EIO).
    pub fn take_lost(&self, ino: u64, owner: u64) -> bool {
        self.state.lock().unwrap().lost.remove(&(ino, owner))
    }

    /// `owner` closed the file: nothing of it to ask back or to report.
    pub fn forget(&self, ino: u64, owner: u64) {
        self.note(ino, None, &whole(owner, LockType::Unlock));
        self.state.lock().unwrap().lost.remove(&(ino, owner));
    }

    /// Server `server` restarted (`client` reaches it): ask back every lock
    /// held on the files it orders.
    pub async fn reclaim(&self, server: usize, client: &ProtocolClient) {
        let inos: Vec<u64> = {
            let st = self.state.lock().unwrap();
            st.files.iter().filter(|(_, (fid, _))| stripe::layout::ordering_server(Some(*fid), self.servers) == server).map(|(i, _)| *i).collect()
        };
        if inos.is_empty() {
            return;
        }
        tracing::info!(server = %client.describe(), files = inos.len(), "storage server restarted or our lease there lapsed: reclaiming this gateway's locks");
        for ino in inos {
            let _g = self.guard(ino).write().await;
            let Some((fid, held)) = self.state.lock().unwrap().files.get(&ino).map(|(fid, f)| (*fid, f.held().to_vec())) else {
                continue;
            };
            let loc = Loc::new("", Some(fid));
            let mut lost: Vec<u64> = Vec::new();
            for h in held {
                if lost.contains(&h.holder.owner) {
                    continue;
                }
                match client.reclaim(loc.clone(), h.to_lock()).await {
                    Ok(()) => self.reclaims.with_label_values(&["granted"]).inc(),
                    Err(e) => {
                        tracing::warn!(server = %client.describe(), ?fid, owner = h.holder.owner, ?e, "a lock could not be reclaimed: its owner is told at its next lock call (EIO)");
                        lost.push(h.holder.owner);
                    }
                }
            }
            for owner in lost {
                // What was given back of the owner's other ranges goes too: it
                // holds nothing there now, as it will be told.
                let _ = client.setlk(&loc, &whole(owner, LockType::Unlock), false).await;
                self.lost(ino, owner);
            }
        }
    }

    fn lost(&self, ino: u64, owner: u64) {
        self.reclaims.with_label_values(&["lost"]).inc();
        self.lost_total.inc();
        let mut st = self.state.lock().unwrap();
        if let Some((_, f)) = st.files.get_mut(&ino) {
            f.set(holder(owner), &whole(owner, LockType::Unlock));
            if f.is_empty() {
                st.files.remove(&ino);
            }
        }
        if st.lost.len() < MAX_LOST {
            st.lost.insert((ino, owner));
        } else {
            tracing::error!(ino, owner, "too many lost locks waiting to be reported: this one is not");
        }
    }
}

/// The whole file, for `owner`.
fn whole(owner: u64, typ: LockType) -> Lock {
    Lock { kind: LockKind::Posix, typ, start: 0, end: LOCK_TO_EOF, owner, pid: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(owner: u64, typ: LockType, start: u64, end: u64) -> Lock {
        Lock { kind: LockKind::Posix, typ, start, end, owner, pid: 1 }
    }

    fn held(g: &Granted, ino: u64) -> Vec<(u64, u64, u64, bool)> {
        let st = g.state.lock().unwrap();
        let mut v: Vec<_> = st.files.get(&ino).map_or(vec![], |(_, f)| {
            f.held().iter().map(|h| (h.holder.owner, h.start, h.end, h.write)).collect()
        });
        v.sort();
        v
    }

    #[test]
    fn the_record_follows_grants_and_unlocks_and_a_loss_is_told_once() {
        let g = Granted::new(2);
        let fid = Some(FileId(7));
        g.note(1, fid, &lock(5, LockType::Write, 0, 99));
        g.note(1, fid, &lock(5, LockType::Unlock, 10, 19));
        g.note(1, fid, &lock(6, LockType::Read, 200, 299));
        assert_eq!(held(&g, 1), vec![(5, 0, 9, true), (5, 20, 99, true), (6, 200, 299, false)]);
        // A loss takes all of the owner's locks on the file, and is told once.
        g.lost(1, 5);
        assert_eq!(held(&g, 1), vec![(6, 200, 299, false)]);
        assert!(!g.take_lost(1, 6) && !g.take_lost(2, 5));
        assert!(g.take_lost(1, 5));
        assert!(!g.take_lost(1, 5));
        assert_eq!(g.lost_total.get(), 1);
        // A close forgets the owner, and a loss not yet told.
        g.lost(1, 6);
        g.forget(1, 6);
        assert!(!g.take_lost(1, 6));
        assert!(g.state.lock().unwrap().files.is_empty());
    }
}
