//! Stat keys this server knows hold nothing in the bank, so that a
//! mutation need not delete them again.
//!
//! Every mutation deletes the file's stat key before it is answered (§6.3).
//! In a run of mutations of one file — an untar's create, writes, `fchown`,
//! `fchmod`, `utimensat` — all but the first delete find nothing (measured:
//! three of four deletes a storage server sent during an untar were
//! misses), yet each costs a bank round trip before the reply.
//!
//! Why a key can be known empty: a stat value only ever enters the bank
//! through a gateway's claim, and the claim is followed by a request that
//! reaches this server — a getattr or lookup of the file (asked of every
//! server that holds part of what the value says), or the create that made
//! it. So after this server's delete of `stat(f)` was confirmed, the key
//! stays empty until such a request arrives here. A mutation may skip the
//! delete when:
//!
//! * the key's last delete by this server was confirmed in the current
//!   epoch, and no getattr, lookup or create arrived here between the
//!   moment that delete was sent and now (every such request, on arrival,
//!   bumps a generation and, once answered, marks its file dirty; a
//!   delete whose generation moved while it was under way marks nothing);
//! * no such request is under way now (one that arrived before the
//!   mutation's disk operation may have read the old state; one that
//!   arrives after reads the new).
//!
//! A server that restarts knows nothing, and an epoch change forgets all.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use xlator::FileId;

/// How many files are remembered before starting over.
const MAX_CLEAN: usize = 1 << 18;

#[derive(Default)]
pub struct KnownEmpty {
    inner: Mutex<Inner>,
    /// requests that may feed a stat populate, arrived so far
    generation: AtomicU64,
    /// ... and under way now
    readers: AtomicU64,
}

#[derive(Default)]
struct Inner {
    epoch: u64,
    fids: HashSet<FileId>,
}

/// A getattr, lookup or create under way (see the module page).
pub struct Reading<'a> {
    table: &'a KnownEmpty,
}

impl KnownEmpty {
    /// A request that may feed a populate of `fid`'s stat (or of a file
    /// not known yet) arrives.
    pub fn reading(&self, fid: Option<FileId>) -> Reading<'_> {
        self.readers.fetch_add(1, SeqCst);
        self.generation.fetch_add(1, SeqCst);
        if let Some(f) = fid {
            self.dirty(f);
        }
        Reading { table: self }
    }

    fn dirty(&self, fid: FileId) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).fids.remove(&fid);
    }

    /// Whether `fid`'s stat key is known empty in `epoch` (the delete may
    /// be skipped).
    pub fn known_empty(&self, epoch: u64, fid: FileId) -> bool {
        if self.readers.load(SeqCst) != 0 {
            return false;
        }
        let i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        i.epoch == epoch && i.fids.contains(&fid)
    }

    /// The generation to pass to [`KnownEmpty::deleted`], taken before a delete
    /// is sent.
    pub fn generation(&self) -> u64 {
        self.generation.load(SeqCst)
    }

    /// The deletes of `fids`' stat keys in `epoch`, sent at generation
    /// `before`, were confirmed.
    pub fn deleted(&self, epoch: u64, before: u64, fids: impl IntoIterator<Item = FileId>) {
        let mut i = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if i.epoch != epoch {
            i.epoch = epoch;
            i.fids.clear();
        }
        // (checked under the lock: a reader's `dirty` after this sees our inserts)
        if self.generation.load(SeqCst) != before {
            return;
        }
        if i.fids.len() >= MAX_CLEAN {
            i.fids.clear();
        }
        i.fids.extend(fids);
    }
}

impl Reading<'_> {
    /// What the request answered about: `fid` (for a lookup, known now).
    pub fn answered(self, fid: FileId) {
        self.table.dirty(fid);
    }

    /// What a request about several files answered about.
    pub fn answered_all(self, fids: impl IntoIterator<Item = FileId>) {
        let mut i = self.table.inner.lock().unwrap_or_else(|p| p.into_inner());
        for f in fids {
            i.fids.remove(&f);
        }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.table.readers.fetch_sub(1, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(n: u128) -> FileId {
        FileId::from_random(n)
    }

    #[test]
    fn a_confirmed_delete_makes_a_key_known_empty_until_a_read() {
        let c = KnownEmpty::default();
        assert!(!c.known_empty(1, f(1)), "nothing is known at first");
        let g = c.generation();
        c.deleted(1, g, [f(1)]);
        assert!(c.known_empty(1, f(1)));
        assert!(!c.known_empty(2, f(1)), "another epoch's keys are not known");
        // a getattr arrives: nothing is skipped while it is under way, and
        // the file is dirty once it is answered
        let r = c.reading(None);
        assert!(!c.known_empty(1, f(1)));
        r.answered(f(1));
        assert!(!c.known_empty(1, f(1)));
    }

    #[test]
    fn a_read_during_a_delete_leaves_nothing_known() {
        let c = KnownEmpty::default();
        let g = c.generation();
        c.reading(Some(f(2))).answered(f(2));
        c.deleted(1, g, [f(2)]);
        assert!(!c.known_empty(1, f(2)), "a populate may have followed the read");
    }

    #[test]
    fn an_epoch_change_forgets_everything() {
        let c = KnownEmpty::default();
        c.deleted(1, c.generation(), [f(3)]);
        c.deleted(2, c.generation(), [f(4)]);
        assert!(!c.known_empty(2, f(3)));
        assert!(c.known_empty(2, f(4)));
    }
}
