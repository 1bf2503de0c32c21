//! One file's locks, as plain data: POSIX byte-range semantics (the model is
//! GlusterFS `features/locks`, `posix.c`), no clocks, no waiting.
//!
//! ```text
//!  holder A: [0 ─── read ─── 99]          A sets write 40..59:
//!  becomes:  [0 r 39][40 w 59][60 r 99]   (own locks are split, never conflict)
//!  holder B: write 50..50  → conflicts with A's [40 w 59]; read 70..80 does not
//! ```
//!
//! A holder is one lock owner of one gateway (session). Its locks never
//! overlap each other: setting a range first cuts that range out of the
//! holder's locks of the same family, then adds the new lock (unless it is an
//! unlock) merged with the holder's touching locks of the same type. Locks
//! of different holders conflict where they overlap and one is a write
//! lock; locks of different families (POSIX, flock, the gateways' append
//! lock) never conflict with each other.
//!
//! Two users: a storage server's lock table (`locks::LockTable`), and
//! each gateway's record of what its own lock owners were granted
//! (`coherence::lock_reclaim`), which it sends back as reclaims when a server
//! restarted. Both apply the same rules, so the record is exactly the
//! server's locks of that gateway.

use crate::{FsError, FsResult, Lock, LockKind, LockType, LOCK_TO_EOF};

/// Who holds a lock: a lock owner (FUSE's `lock_owner`) of one gateway.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Holder {
    pub session: u64,
    pub owner: u64,
}

/// A granted lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Held {
    pub holder: Holder,
    pub kind: LockKind,
    pub write: bool,
    pub start: u64,
    /// inclusive
    pub end: u64,
    pub pid: u32,
}

impl Held {
    /// As the operations carry it (what F_GETLK reports).
    pub fn to_lock(self) -> Lock {
        let typ = if self.write { LockType::Write } else { LockType::Read };
        Lock { kind: self.kind, typ, start: self.start, end: self.end, owner: self.holder.owner, pid: self.pid }
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }
}

/// A lock request's range must be a real one: `start <= end <= LOCK_TO_EOF`.
pub fn check(lock: &Lock) -> FsResult<()> {
    if lock.start > lock.end || lock.end > LOCK_TO_EOF {
        return Err(FsError::EINVAL);
    }
    Ok(())
}

/// The locks held on one file.
#[derive(Default, Debug)]
pub struct FileLocks {
    held: Vec<Held>,
}

impl FileLocks {
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn held(&self) -> &[Held] {
        &self.held
    }

    /// How many of these locks `session` holds.
    pub fn count(&self, session: u64) -> usize {
        self.held.iter().filter(|h| h.holder.session == session).count()
    }

    /// The first lock of another holder that `lock` (by `holder`) would
    /// collide with; an unlock collides with nothing.
    pub fn conflict(&self, holder: Holder, lock: &Lock) -> Option<Held> {
        let write = match lock.typ {
            LockType::Unlock => return None,
            LockType::Write => true,
            LockType::Read => false,
        };
        self.held
            .iter()
            .find(|h| h.holder != holder && h.kind == lock.kind && h.overlaps(lock.start, lock.end) && (h.write || write))
            .copied()
    }

    /// Set `lock` for `holder` (the caller checked [`FileLocks::conflict`]):
    /// take, change type, or (`Unlock`) drop the range.
    pub fn set(&mut self, holder: Holder, lock: &Lock) {
        let (start, end) = (lock.start, lock.end);
        let mine = |h: &Held| h.holder == holder && h.kind == lock.kind;
        let mut kept = Vec::with_capacity(self.held.len() + 2);
        for h in self.held.drain(..) {
            if !mine(&h) || !h.overlaps(start, end) {
                kept.push(h);
                continue;
            }
            // Keep what lies outside the new range.
            if h.start < start {
                kept.push(Held { end: start - 1, ..h });
            }
            if h.end > end {
                kept.push(Held { start: end + 1, ..h });
            }
        }
        self.held = kept;
        let write = match lock.typ {
            LockType::Unlock => return,
            LockType::Write => true,
            LockType::Read => false,
        };
        let mut new = Held { holder, kind: lock.kind, write, start, end, pid: lock.pid };
        // Merge with the holder's locks of the same type that touch it.
        self.held.retain(|h| {
            let touches = h.end.saturating_add(1) >= new.start && new.end.saturating_add(1) >= h.start;
            if mine(h) && h.write == write && touches {
                new.start = new.start.min(h.start);
                new.end = new.end.max(h.end);
                false
            } else {
                true
            }
        });
        self.held.push(new);
    }

    /// Whether `holder` holds `lock` already (one of its locks, of the same
    /// family and type, covers the range: its touching locks of one type are
    /// merged, so one is enough).
    pub fn covers(&self, holder: Holder, lock: &Lock) -> bool {
        let write = lock.typ == LockType::Write;
        lock.typ != LockType::Unlock
            && self.held.iter().any(|h| {
                h.holder == holder && h.kind == lock.kind && h.write == write && h.start <= lock.start && lock.end <= h.end
            })
    }

    /// Drop every lock of `session`; returns how many went.
    pub fn drop_session(&mut self, session: u64) -> usize {
        let before = self.held.len();
        self.held.retain(|h| h.holder.session != session);
        before - self.held.len()
    }
}

/// How many locks `set` would leave (to check the bounds before setting).
pub fn after_set(file: &FileLocks, holder: Holder, lock: &Lock) -> usize {
    let mut probe = FileLocks { held: file.held.clone() };
    probe.set(holder, lock);
    probe.len()
}
