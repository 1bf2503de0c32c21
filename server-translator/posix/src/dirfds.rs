//! A bounded table of directory id → `O_PATH` fd: the common case of
//! finding a directory by id is one lookup here.
//!
//! An `O_PATH` fd keeps naming its directory across renames anywhere in the
//! export, so an entry never goes stale by moving; it goes stale only when
//! the directory is removed (its link count drops to 0), which the caller
//! checks on every hit (one `fstat`, answered from the inode in memory).
//! Entries are put here only after the id on the directory was read and
//! matched, and clients cannot change that id (`*.imca.*` xattrs are
//! refused to them), so an entry never names another object.
//!
//! Bounded (an LRU): each entry holds one fd. Entries are `Arc`s so an
//! evicted fd stays valid for the requests using it.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use xlator::FileId;

/// Directory fds kept by default (next to the data fds of [`crate::FdCache`]).
pub const DEFAULT_DIR_FDS: usize = 4096;

pub(crate) struct DirFds {
    map: Mutex<LruCache<FileId, Arc<OwnedFd>>>,
}

impl DirFds {
    pub fn new(capacity: usize) -> DirFds {
        DirFds { map: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).unwrap())) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<FileId, Arc<OwnedFd>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, fid: FileId) -> Option<Arc<OwnedFd>> {
        self.lock().get(&fid).cloned()
    }

    pub fn insert(&self, fid: FileId, fd: Arc<OwnedFd>) {
        // The evicted fd (if any) is closed outside the lock.
        let old = self.lock().push(fid, fd);
        drop(old);
    }

    pub fn remove(&self, fid: FileId) {
        let old = self.lock().pop(&fid);
        drop(old);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Arc<OwnedFd> {
        Arc::new(OwnedFd::from(std::fs::File::open("/").unwrap()))
    }

    #[test]
    fn bounded_lru_of_directories() {
        let c = DirFds::new(2);
        c.insert(FileId(1), open());
        c.insert(FileId(2), open());
        assert!(c.get(FileId(1)).is_some());
        c.insert(FileId(3), open());
        assert_eq!(c.len(), 2);
        assert!(c.get(FileId(2)).is_none(), "least recently used is evicted");
        c.remove(FileId(1));
        assert!(c.get(FileId(1)).is_none() && c.get(FileId(3)).is_some());
    }
}
