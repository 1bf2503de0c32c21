//! A bounded cache of open data fds keyed by file id.
//!
//! Opening a file per read would cost two syscalls per request; keeping one
//! fd per inode forever would hit the 20,000 open-file limit. An LRU of at
//! most `capacity` fds sits between. Entries are `Arc`s, so an evicted fd
//! stays valid for the requests still using it and closes with the last one.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use xlator::FileId;

pub struct FdCache {
    map: Mutex<LruCache<FileId, Arc<OwnedFd>>>,
}

impl FdCache {
    pub fn new(capacity: usize) -> FdCache {
        FdCache { map: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).unwrap())) }
    }

    pub fn get(&self, fid: FileId) -> Option<Arc<OwnedFd>> {
        self.map.lock().unwrap().get(&fid).cloned()
    }

    pub fn insert(&self, fid: FileId, fd: Arc<OwnedFd>) {
        // The evicted fd (if any) is dropped outside the lock: close(2) can be slow.
        let old = self.map.lock().unwrap().push(fid, fd);
        drop(old);
    }

    pub fn remove(&self, fid: FileId) {
        let old = self.map.lock().unwrap().pop(&fid);
        drop(old);
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_lru() {
        let c = FdCache::new(2);
        let open = || Arc::new(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()));
        c.insert(FileId(1), open());
        c.insert(FileId(2), open());
        assert!(c.get(FileId(1)).is_some());
        c.insert(FileId(3), open());
        assert_eq!(c.len(), 2);
        assert!(c.get(FileId(2)).is_none(), "least recently used is evicted");
        assert!(c.get(FileId(1)).is_some() && c.get(FileId(3)).is_some());
        c.remove(FileId(1));
        assert!(c.get(FileId(1)).is_none());
    }
}
