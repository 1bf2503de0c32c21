//! Files whose blocks this server knows are not in the bank, so that a
//! write need not put them there.
//!
//! A write rewrites every block it covers in the bank and waits for the
//! node to confirm before it is answered (§6.3): a round trip per write,
//! and for a partial block a disk read back first. For a file made a moment
//! ago (an untar, a compiler's output) there is nothing to rewrite: no
//! block of it was ever stored.
//!
//! Why a file's blocks can be known absent: a block value only ever enters
//! the bank from the storage server that owns it (SMCache's populate after
//! a read, its rewrite after a write; gateways only read blocks), keyed by
//! the file's id, and a file's id is new when the create that made it here
//! carried it (drawn by the gateway; an existing file a create opens keeps
//! its own). So from that create until this server first puts one of its
//! blocks, there is none, in any epoch. A write then leaves the bank
//! alone: a gateway reading the block misses and reads the disk, which
//! already holds the write. The first put (a read's populate, a threaded
//! repopulate) ends it, under the file's lock, before the put is sent, so
//! every later write rewrites as before.
//!
//! **Put at close.** Left at that, the first other gateway to read a new
//! file misses and pays more than with no bank at all. So the blocks a
//! fresh file had written here are put when the file is closed (its
//! release reaches this server): read back from disk, as a populate, off
//! the reply path. Those are exactly the blocks this server owns (a server
//! receives writes only for its stripes), and the file stops being fresh
//! under its lock before the put is sent, as for any populate. A file
//! written over more than [`MAX_PUT_AT_CLOSE`] blocks is not put (a large
//! file written once is read by few; its first reader misses).
//!
//! A server that restarts knows nothing. Bounded: past [`MAX_FRESH`] files
//! it starts over (forgetting only costs rewrites).
//!
//! One case this does not cover: a server whose disk was wiped and whose
//! file a heal then makes again, with the same id, while the bank still
//! holds blocks this server stored before the wipe. Such a file's data is
//! lost either way (it was striped, not copied); its old blocks would be
//! served by reads in that case already, before any write.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use xlator::FileId;

/// How many fresh files are remembered before starting over.
const MAX_FRESH: usize = 1 << 18;

/// Blocks of a fresh file written here that are still put in the bank when
/// it is closed (`SmCache::release`); a file written over more is left out
/// of the bank until read (a large file's first reader pays one miss per
/// read, not the bank every block of it while it is written).
pub const MAX_PUT_AT_CLOSE: usize = 16;

/// A fresh file: the blocks written here since its create, while at most
/// [`MAX_PUT_AT_CLOSE`] (None past that).
type Written = Option<BTreeSet<u64>>;

#[derive(Default)]
pub struct NeverCached {
    fids: Mutex<HashMap<FileId, Written>>,
}

impl NeverCached {
    fn fids(&self) -> std::sync::MutexGuard<'_, HashMap<FileId, Written>> {
        self.fids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A create made `fid` here, new.
    pub fn created(&self, fid: FileId) {
        let mut f = self.fids();
        if f.len() >= MAX_FRESH {
            f.clear();
        }
        f.insert(fid, Some(BTreeSet::new()));
    }

    /// Whether no block of `fid` was ever put in the bank.
    pub fn contains(&self, fid: FileId) -> bool {
        self.fids().contains_key(&fid)
    }

    /// A write to fresh `fid` left blocks `first..=last` unstored.
    pub fn wrote(&self, fid: FileId, first: u64, last: u64) {
        let mut f = self.fids();
        let Some(w) = f.get_mut(&fid) else { return };
        if let Some(blocks) = w {
            if last - first >= MAX_PUT_AT_CLOSE as u64 {
                *w = None;
                return;
            }
            blocks.extend(first..=last);
            if blocks.len() > MAX_PUT_AT_CLOSE {
                *w = None;
            }
        }
    }

    /// The blocks of fresh `fid` to put in the bank now that it is closed
    /// (it stays fresh until [`NeverCached::putting`]); None if it is not
    /// fresh or was written over too many.
    pub fn to_put(&self, fid: FileId) -> Option<Vec<u64>> {
        let f = self.fids();
        let blocks = f.get(&fid)?.as_ref()?;
        (!blocks.is_empty()).then(|| blocks.iter().copied().collect())
    }

    /// A block of `fid` is about to be put in the bank.
    pub fn putting(&self, fid: FileId) {
        self.fids().remove(&fid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blocks_written_while_fresh_are_put_at_close_unless_too_many() {
        let f = NeverCached::default();
        let (small, big, huge) = (FileId(1), FileId(2), FileId(3));
        for x in [small, big, huge] {
            f.created(x);
        }
        assert_eq!(f.to_put(small), None, "nothing written: nothing to put");
        f.wrote(small, 0, 0);
        f.wrote(small, 0, 1);
        assert_eq!(f.to_put(small), Some(vec![0, 1]));
        for b in 0..=MAX_PUT_AT_CLOSE as u64 {
            f.wrote(big, b, b);
        }
        assert_eq!(f.to_put(big), None, "written over too many blocks");
        f.wrote(huge, 0, MAX_PUT_AT_CLOSE as u64);
        assert_eq!(f.to_put(huge), None, "one write over too many blocks");
        assert!(f.contains(big) && f.contains(huge), "still fresh: writes need not rewrite");
        f.wrote(FileId(9), 0, 0);
        assert_eq!(f.to_put(FileId(9)), None, "not made here");
    }

    #[test]
    fn a_file_is_fresh_from_its_create_to_its_first_put() {
        let f = NeverCached::default();
        let (a, b) = (FileId(7), FileId(8));
        assert!(!f.contains(a), "nothing is known of a file not made here");
        f.created(a);
        assert!(f.contains(a) && !f.contains(b));
        f.putting(a);
        assert!(!f.contains(a));
        assert_eq!(f.to_put(a), None, "not fresh: nothing to put at close");
        for n in 0..MAX_FRESH as u128 + 1 {
            f.created(FileId(1000 + n));
        }
        assert!(f.fids().len() <= MAX_FRESH, "bounded");
    }
}
