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
//!
//! A removal **hold** keeps a file whose last name went away for a short
//! grace (the kernel-cache lease) even when nobody has it open: a gateway
//! whose kernel still held the old name when the removal happened may have
//! an open of it on the way (gateways do not wait for opens, and a callback
//! reaches them only after the removal), and that open must find the file,
//! as an open made just before the removal would have. [`FdCache::expire_holds`]
//! lets go of holds past their time, and a write that finds the disk full
//! ends them all at once ([`FdCache::release_all_holds`]).

use lru::LruCache;
use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use xlator::FileId;

struct Entry {
    fd: Arc<OwnedFd>,
    /// opens not yet released
    opens: u32,
    /// kept after its last name went, until the hold expires
    held: bool,
}

pub struct FdCache {
    map: Mutex<LruCache<FileId, Entry>>,
    /// removal holds in the order they end
    holds: Mutex<VecDeque<(Instant, FileId)>>,
}

impl FdCache {
    pub fn new(capacity: usize) -> FdCache {
        FdCache { map: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).unwrap())), holds: Mutex::default() }
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
        let old = map.push(fid, Entry { fd: fd.clone(), opens: 0, held: false });
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
            Some(e) if e.opens > 0 || e.held => true,
            Some(_) => {
                let old = map.pop(&fid);
                drop(map);
                drop(old);
                false
            }
            None => false,
        }
    }

    /// Keep `fid`'s cached fd (its last name just went) until `until`,
    /// open or not. Returns false when no fd is cached to keep.
    pub fn hold(&self, fid: FileId, until: Instant) -> bool {
        match self.map.lock().unwrap().peek_mut(&fid) {
            Some(e) => e.held = true,
            None => return false,
        }
        self.holds.lock().unwrap().push_back((until, fid));
        true
    }

    /// Let go of the holds that ended by `now`: a file nobody opened
    /// meanwhile is closed (its space freed). Returns how many ended.
    pub fn expire_holds(&self, now: Instant) -> usize {
        let mut ended = Vec::new();
        {
            let mut holds = self.holds.lock().unwrap();
            while holds.front().is_some_and(|(t, _)| *t <= now) {
                ended.extend(holds.pop_front().map(|(_, f)| f));
            }
        }
        let mut closed = Vec::new();
        let mut map = self.map.lock().unwrap();
        for fid in &ended {
            if let Some(e) = map.peek_mut(fid) {
                e.held = false;
                if e.opens == 0 {
                    closed.extend(map.pop(fid));
                }
            }
        }
        drop(map);
        drop(closed);
        ended.len()
    }

    /// End every hold now (the disk is full: their space is wanted).
    pub fn release_all_holds(&self) -> usize {
        let last = self.holds.lock().unwrap().back().map(|(t, _)| *t);
        last.map_or(0, |t| self.expire_holds(t))
    }

    /// Whether `fid` is under a removal hold.
    pub fn is_held(&self, fid: FileId) -> bool {
        self.map.lock().unwrap().peek(&fid).is_some_and(|e| e.held)
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
    fn a_hold_keeps_a_removed_file_until_it_ends_or_its_last_release() {
        let c = FdCache::new(4);
        let t0 = Instant::now();
        let grace = std::time::Duration::from_secs(1);
        assert!(!c.hold(FileId(9), t0 + grace), "nothing cached: nothing to hold");
        c.insert(FileId(1), open());
        c.insert(FileId(2), open());
        assert!(c.hold(FileId(1), t0 + grace) && c.hold(FileId(2), t0 + grace));
        assert!(c.forget_unless_open(FileId(1)), "held: kept although nobody has it open");
        // a late open of file 2 arrives within the hold and keeps it past it
        c.opened(FileId(2));
        assert_eq!(c.expire_holds(t0), 0, "not yet");
        assert!(c.is_held(FileId(1)));
        assert_eq!(c.expire_holds(t0 + grace), 2);
        assert!(!c.contains(FileId(1)), "closed when its hold ended");
        assert!(c.contains(FileId(2)) && !c.is_held(FileId(2)), "still open");
        assert_eq!(c.released(FileId(2)), 0);
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
