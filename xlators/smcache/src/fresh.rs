//! Files made on this server whose blocks hold nothing in the bank, so
//! that a write need not rewrite them there.
//!
//! A write updates the bank's copies of the blocks it covers before it is
//! answered (write-update, §6.3): a bank round trip, and a read back from
//! disk of every partial block. For a file just made, such as each file of
//! an untar, nothing can be in those keys yet: a block enters the bank only
//! through this server, by a read's populate (SMCache `read`, which every
//! gateway's fill goes through, the blocks being this server's) or a
//! write's update. So while no read of the file arrived here since this
//! server created it, its block keys are empty (a new file's id is drawn
//! fresh), and a write may leave them so: the first read fills them from
//! the disk, after the write.
//!
//! Order: a read marks its file before it reads the disk, and a write
//! looks after its own disk write, under the file's lock; so a read either
//! marked first (the write updates the bank as usual) or reads what the
//! write wrote. A server that restarts knows nothing, which is safe.

use std::collections::HashSet;
use std::sync::Mutex;
use xlator::FileId;

/// How many files are remembered before starting over.
const MAX_FRESH: usize = 1 << 18;

#[derive(Default)]
pub struct Fresh {
    fids: Mutex<HashSet<FileId>>,
}

impl Fresh {
    /// This server just created `fid` (a new object, not an existing one a
    /// create opened).
    pub fn created(&self, fid: FileId) {
        let mut f = self.lock();
        if f.len() >= MAX_FRESH {
            f.clear();
        }
        f.insert(fid);
    }

    /// A read of `fid` arrived: its blocks may be in the bank from now on.
    pub fn read(&self, fid: FileId) {
        self.lock().remove(&fid);
    }

    /// Whether no read of `fid` arrived since this server created it.
    pub fn is_fresh(&self, fid: FileId) -> bool {
        self.lock().contains(&fid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<FileId>> {
        self.fids.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_until_read() {
        let f = Fresh::default();
        let a = FileId::from_random(1);
        assert!(!f.is_fresh(a), "nothing is known at first");
        f.created(a);
        assert!(f.is_fresh(a));
        f.read(a);
        assert!(!f.is_fresh(a));
    }

    #[test]
    fn bounded() {
        let f = Fresh::default();
        for n in 0..(MAX_FRESH as u128 + 10) {
            f.created(FileId::from_random(n + 1));
        }
        assert!(f.lock().len() <= MAX_FRESH);
    }
}
