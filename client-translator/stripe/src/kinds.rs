//! Which file ids are directories (a bounded memory).
//!
//! A directory's attributes are the same on every server (namespace
//! operations go everywhere; size and blocks mean nothing for a directory),
//! so stripe answers a directory's getattr from server 0 alone. A file id
//! never changes kind, so what is remembered never goes stale; forgetting
//! (LRU) only costs a merged getattr.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use xlator::{Attr, FileId, FileKind};

pub struct DirIds {
    known: Mutex<LruCache<FileId, ()>>,
}

impl DirIds {
    pub fn new(capacity: usize) -> DirIds {
        DirIds { known: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN))) }
    }

    pub fn is_dir(&self, fid: Option<FileId>) -> bool {
        match fid {
            Some(FileId::ROOT) => true,
            Some(f) => self.known.lock().unwrap_or_else(|p| p.into_inner()).get(&f).is_some(),
            None => false,
        }
    }

    /// Learn from an answer.
    pub fn note(&self, a: &Attr) {
        if a.kind == FileKind::Dir {
            self.known.lock().unwrap_or_else(|p| p.into_inner()).put(a.fid, ());
        }
    }
}
