//! Open directory streams: FUSE offsets ↔ the pipeline's readdir cookies.
//!
//! FUSE continues a listing from the `offset` of the last entry it kept; the
//! pipeline continues from an opaque cookie. Each open directory keeps the
//! cookie that follows every entry it handed out, so FUSE offsets stay small
//! dense integers: 0 = start, 1 = after ".", 2 = after "..", and 3 + k = after
//! the k-th real entry. Cost: 8 bytes per listed entry while the directory is
//! open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct DirStream {
    /// cookies[k] continues the listing after real entry k
    cookies: Vec<u64>,
}

/// FUSE offsets of the synthetic entries.
pub const AFTER_DOT: u64 = 1;
pub const AFTER_DOTDOT: u64 = 2;

impl DirStream {
    /// The pipeline cookie to list from, for a FUSE offset ≥ 2.
    pub fn cookie_at(&self, offset: u64) -> Option<u64> {
        match offset {
            0..=AFTER_DOTDOT => Some(0),
            k => self.cookies.get((k - 3) as usize).copied(),
        }
    }

    /// Entry `k` (0-based, real entries only) is followed by `cookie`; returns
    /// the FUSE offset to report for it.
    pub fn record(&mut self, k: u64, cookie: u64) -> u64 {
        let k_usize = k as usize;
        if k_usize < self.cookies.len() {
            self.cookies[k_usize] = cookie;
        } else {
            self.cookies.push(cookie);
        }
        k + 3
    }
}

#[derive(Default)]
pub struct DirStreams {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>>,
}

impl DirStreams {
    pub fn open(&self) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().insert(fh, Arc::default());
        fh
    }

    pub fn get(&self, fh: u64) -> Option<Arc<tokio::sync::Mutex<DirStream>>> {
        self.lock().get(&fh).cloned()
    }

    pub fn close(&self, fh: u64) {
        self.lock().remove(&fh);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<tokio::sync::Mutex<DirStream>>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_to_cookies() {
        let mut d = DirStream::default();
        assert_eq!(d.cookie_at(0), Some(0));
        assert_eq!(d.cookie_at(2), Some(0));
        assert_eq!(d.record(0, 777), 3);
        assert_eq!(d.record(1, 999), 4);
        assert_eq!(d.cookie_at(3), Some(777));
        assert_eq!(d.cookie_at(4), Some(999));
        assert_eq!(d.cookie_at(5), None);
        // re-reading after a rewind overwrites, not appends
        assert_eq!(d.record(0, 778), 3);
        assert_eq!(d.cookie_at(3), Some(778));
    }
}
