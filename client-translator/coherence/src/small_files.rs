//! The bytes of small files written through this gateway, kept in the memo
//! beside their attributes, so that reading one back costs no round trip.
//!
//! Without a writeback cache the kernel keeps a written page only if the
//! write covered all of it: the last, partial page of every file (all of a
//! small file's) is read back from the servers or the bank, a network
//! round trip, although this gateway just sent those very bytes. A file
//! written here whole, or extended and overwritten here from a start
//! remembered here, is therefore remembered whole, up to [`MAX_FILE`]
//! bytes, and its READs are answered from it.
//!
//! The bytes follow the memo's rules exactly (`memo`): they are stored by a
//! write's answer only if nothing moved since the write started, they go
//! with the inode's attributes (a callback, a change here, a lapsed lease),
//! and they are served only while the lease holds. A remembered attribute
//! that comes back with another size or mtime drops them too.
//!
//! Bounded by [`BUDGET`] bytes in all; past it the files remembered
//! longest ago go first (dropping everything at once made the next reads of
//! the files just written go to the servers, a cliff every 64 MiB written).

use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// The largest file whose bytes are remembered.
pub const MAX_FILE: u64 = 64 << 10;

/// The most bytes remembered at once.
const BUDGET: usize = 64 << 20;

/// Remembered bytes per inode, within [`BUDGET`].
#[derive(Default)]
pub struct SmallFiles {
    /// each file's bytes, with the number of the insert that put them
    map: HashMap<u64, (Bytes, u64)>,
    /// (insert number, inode), oldest first; an item whose inode was since
    /// removed or replaced is stale and skipped
    order: VecDeque<(u64, u64)>,
    inserts: u64,
    bytes: usize,
}

impl SmallFiles {
    pub fn get(&self, ino: u64) -> Option<&Bytes> {
        self.map.get(&ino).map(|(d, _)| d)
    }

    pub fn insert(&mut self, ino: u64, data: Bytes) {
        self.remove(ino);
        if data.len() as u64 > MAX_FILE {
            return;
        }
        while self.bytes + data.len() > BUDGET && self.drop_oldest() {}
        self.inserts += 1;
        self.bytes += data.len();
        self.map.insert(ino, (data, self.inserts));
        self.order.push_back((self.inserts, ino));
        // stale items are skipped when they come up; compact them when
        // they outnumber the live ones (a file rewritten over and over)
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order.retain(|(n, ino)| map.get(ino).is_some_and(|(_, m)| m == n));
        }
    }

    /// Forget the file remembered longest ago; false if none is left.
    fn drop_oldest(&mut self) -> bool {
        while let Some((n, ino)) = self.order.pop_front() {
            if self.map.get(&ino).is_some_and(|(_, m)| *m == n) {
                self.remove(ino);
                return true;
            }
        }
        false
    }

    pub fn remove(&mut self, ino: u64) -> Option<Bytes> {
        let (d, _) = self.map.remove(&ino)?;
        self.bytes -= d.len();
        Some(d)
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.bytes = 0;
    }
}

/// A file's bytes after `data` was written at `offset`, when they are all
/// known: `before` is what was remembered when the write started (None:
/// nothing), `size` the file's size after it (from its answer).
pub fn after_write(before: Option<Bytes>, offset: u64, data: &Bytes, size: u64) -> Option<Bytes> {
    let end = offset.checked_add(data.len() as u64)?;
    if size > MAX_FILE || end > size {
        return None;
    }
    if offset == 0 && end == size {
        return Some(data.clone());
    }
    // Patch what was known, which must reach the write (no hole) and, with
    // the write, make up the whole file.
    let before = before?;
    let known = before.len() as u64;
    if known < offset || known.max(end) != size {
        return None;
    }
    let mut v = before.to_vec();
    v.resize(size as usize, 0);
    v[offset as usize..end as usize].copy_from_slice(data);
    Some(Bytes::from(v))
}

/// The part of `data` a READ of `size` bytes at `offset` gets.
pub fn slice(data: &Bytes, offset: u64, size: u32) -> Bytes {
    let start = offset.min(data.len() as u64) as usize;
    let end = offset.saturating_add(u64::from(size)).min(data.len() as u64) as usize;
    data.slice(start..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn a_file_is_known_when_written_whole_or_patched_from_what_was_known() {
        assert_eq!(after_write(None, 0, &b("hello"), 5), Some(b("hello")));
        assert_eq!(after_write(None, 0, &b("hello"), 9), None, "the rest is not known");
        assert_eq!(after_write(None, 5, &b("world"), 10), None);
        assert_eq!(after_write(Some(b("hello")), 5, &b("world"), 10), Some(b("helloworld")), "appended");
        assert_eq!(after_write(Some(b("hello")), 1, &b("E"), 5), Some(b("hEllo")), "overwritten inside");
        assert_eq!(after_write(Some(b("hello")), 3, &b("LOw"), 6), Some(b("helLOw")), "across the end");
        assert_eq!(after_write(Some(b("hello")), 7, &b("x"), 8), None, "a hole after what was known");
        assert_eq!(after_write(Some(b("hello")), 0, &b("H"), 9), None, "the file is longer than what was known");
        assert_eq!(after_write(Some(b("hello")), 0, &b("H"), 4), None, "the size disagrees with what was known");
        let big = Bytes::from(vec![0u8; MAX_FILE as usize + 1]);
        assert_eq!(after_write(None, 0, &big, MAX_FILE + 1), None, "too large to remember");
        assert_eq!(after_write(None, u64::MAX, &b("x"), 1), None);
    }

    #[test]
    fn a_read_gets_what_lies_in_its_range() {
        let d = b("0123456789");
        assert_eq!(slice(&d, 0, 4096), d);
        assert_eq!(slice(&d, 3, 4), b("3456"));
        assert_eq!(slice(&d, 8, 10), b("89"));
        assert_eq!(slice(&d, 10, 10), b(""));
        assert_eq!(slice(&d, u64::MAX, u32::MAX), b(""));
    }

    #[test]
    fn the_budget_bounds_what_is_held_and_the_oldest_go_first() {
        let mut c = SmallFiles::default();
        let chunk = Bytes::from(vec![1u8; MAX_FILE as usize]);
        let per_budget = BUDGET / chunk.len();
        let total = per_budget as u64 + 5;
        for ino in 0..total {
            c.insert(ino, chunk.clone());
            assert!(c.bytes <= BUDGET);
        }
        assert!((0..5).all(|ino| c.get(ino).is_none()), "the oldest went");
        assert!((5..total).all(|ino| c.get(ino).is_some()), "the rest stayed");
        c.insert(7, b("abc"));
        c.insert(7, b("abcdef"));
        assert_eq!(c.remove(7), Some(b("abcdef")));
        let held: usize = c.map.values().map(|(d, _)| d.len()).sum();
        assert_eq!(c.bytes, held, "the count follows replacements and removals");
        c.insert(8, Bytes::from(vec![0u8; MAX_FILE as usize + 1]));
        assert!(c.get(8).is_none());
        for _ in 0..100_000 {
            c.insert(9, b("x"));
        }
        assert!(c.order.len() <= 2 * c.map.len() + 1025, "{} items queued for {} files", c.order.len(), c.map.len());
        c.insert(10, chunk.clone());
        assert!(c.get(9).is_some() && c.get(10).is_some(), "a file rewritten since counts from its last write");
    }
}
