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
//! A server that restarts knows nothing. Bounded: past [`MAX_FRESH`] files
//! it starts over (forgetting only costs rewrites).
//!
//! One case this does not cover: a server whose disk was wiped and whose
//! file a heal then makes again, with the same id, while the bank still
//! holds blocks this server stored before the wipe. Such a file's data is
//! lost either way (it was striped, not copied); its old blocks would be
//! served by reads in that case already, before any write.

use std::collections::HashSet;
use std::sync::Mutex;
use xlator::FileId;

/// How many fresh files are remembered before starting over.
const MAX_FRESH: usize = 1 << 18;

#[derive(Default)]
pub struct NeverCached {
    fids: Mutex<HashSet<FileId>>,
}

impl NeverCached {
    fn fids(&self) -> std::sync::MutexGuard<'_, HashSet<FileId>> {
        self.fids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A create made `fid` here, new.
    pub fn created(&self, fid: FileId) {
        let mut f = self.fids();
        if f.len() >= MAX_FRESH {
            f.clear();
        }
        f.insert(fid);
    }

    /// Whether no block of `fid` was ever put in the bank.
    pub fn contains(&self, fid: FileId) -> bool {
        self.fids().contains(&fid)
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
    fn a_file_is_fresh_from_its_create_to_its_first_put() {
        let f = NeverCached::default();
        let (a, b) = (FileId(7), FileId(8));
        assert!(!f.contains(a), "nothing is known of a file not made here");
        f.created(a);
        assert!(f.contains(a) && !f.contains(b));
        f.putting(a);
        assert!(!f.contains(a));
        for n in 0..MAX_FRESH as u128 + 1 {
            f.created(FileId(1000 + n));
        }
        assert!(f.fids().len() <= MAX_FRESH, "bounded");
    }
}
