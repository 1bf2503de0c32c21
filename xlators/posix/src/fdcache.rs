//! A bounded cache of open data fds keyed by file id, with the number of
//! opens each file has from the gateways.
//!
//! Opening a file per read would cost two syscalls per request; keeping one
//! fd per inode forever would hit the 20,000 open-file limit. An LRU of at
//! most `capacity` fds sits between. Entries are `Arc`s, so an evicted fd
//! stays valid for the requests still using it and closes with the last one.
//!
//! The open count is what decides the fate of a file whose last name goes
//! away: while a gateway has it open (open or create, not yet released) the
//! fd is kept, so the file stays readable by id like an unlinked open file
//! on a local FS; otherwise the fd is closed at once and its space freed.
//! The count lives in the entry: an evicted entry forgets it, exactly as it
//! forgets the unlinked file itself.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use xlator::FileId;

struct Entry {
    fd: Arc<OwnedFd>,
    /// opens not yet released
    opens: u32,
}

pub struct FdCache {
    map: Mutex<LruCache<FileId, Entry>>,
}

impl FdCache {
    pub fn new(capacity: usize) -> FdCache {
        FdCache { map: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).unwrap())) }
    }

    pub fn get(&self, fid: FileId) -> Option<Arc<OwnedFd>> {
        self.map.lock().unwrap().get(&fid).map(|e| e.fd.clone())
    }

    /// Whether an fd of `fid` is cached (without touching the LRU order).
    pub fn contains(&self, fid: FileId) -> bool {
        self.map.lock().unwrap().contains(&fid)
    }

    /// Cache `fd` for `fid` unless another request cached one meanwhile;
    /// returns the fd to use (keeping the first one keeps its open count).
    pub fn insert(&self, fid: FileId, fd: Arc<OwnedFd>) -> Arc<OwnedFd> {
        let mut map = self.map.lock().unwrap();
        if let Some(e) = map.get(&fid) {
            return e.fd.clone();
        }
        // The evicted fd (if any) is dropped outside the lock: close(2) can be slow.
        let old = map.push(fid, Entry { fd: fd.clone(), opens: 0 });
        drop(map);
        drop(old);
        fd
    }

    /// A gateway opened the file (open or create); its fd must be cached.
    pub fn opened(&self, fid: FileId) {
        if let Some(e) = self.map.lock().unwrap().get_mut(&fid) {
            e.opens = e.opens.saturating_add(1);
        }
    }

    /// A gateway released the file; returns the opens left (never below 0:
    /// a release without an open, or after an eviction, is harmless).
    pub fn released(&self, fid: FileId) -> u32 {
        match self.map.lock().unwrap().peek_mut(&fid) {
            Some(e) => {
                e.opens = e.opens.saturating_sub(1);
                e.opens
            }
            None => 0,
        }
    }

    /// Close the fd of a file whose last name went away, unless a gateway
    /// still has it open. Returns whether it was kept.
    pub fn forget_unless_open(&self, fid: FileId) -> bool {
        let mut map = self.map.lock().unwrap();
        match map.peek(&fid) {
            Some(e) if e.opens > 0 => true,
            Some(_) => {
                let old = map.pop(&fid);
                drop(map);
                drop(old);
                false
            }
            None => false,
        }
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

    fn open() -> Arc<OwnedFd> {
        Arc::new(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()))
    }

    #[test]
    fn bounded_and_lru() {
        let c = FdCache::new(2);
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

    #[test]
    fn the_first_fd_cached_wins_and_keeps_its_opens() {
        let c = FdCache::new(4);
        let first = open();
        c.insert(FileId(1), first.clone());
        c.opened(FileId(1));
        let got = c.insert(FileId(1), open());
        assert!(Arc::ptr_eq(&got, &first), "a racing second open does not replace the first");
        assert!(c.forget_unless_open(FileId(1)), "still open");
        assert_eq!(c.released(FileId(1)), 0);
        assert_eq!(c.released(FileId(1)), 0, "never below zero");
        assert!(!c.forget_unless_open(FileId(1)));
        assert!(!c.contains(FileId(1)), "closed once nobody has it open");
    }
}
