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
//! Bounded by [`BUDGET`] bytes in all; past it everything held is dropped
//! and the count starts again.

use bytes::Bytes;
use std::collections::HashMap;

/// The largest file whose bytes are remembered.
pub const MAX_FILE: u64 = 64 << 10;

/// The most bytes remembered at once.
const BUDGET: usize = 64 << 20;

/// Remembered bytes per inode, within [`BUDGET`].
#[derive(Default)]
pub struct Contents {
    map: HashMap<u64, Bytes>,
    bytes: usize,
}

impl Contents {
    pub fn get(&self, ino: u64) -> Option<&Bytes> {
        self.map.get(&ino)
    }

    pub fn insert(&mut self, ino: u64, data: Bytes) {
        self.remove(ino);
        if data.len() as u64 > MAX_FILE {
            return;
        }
        if self.bytes + data.len() > BUDGET {
            self.clear();
        }
        self.bytes += data.len();
        self.map.insert(ino, data);
    }

    pub fn remove(&mut self, ino: u64) -> Option<Bytes> {
        let d = self.map.remove(&ino)?;
        self.bytes -= d.len();
        Some(d)
    }

    pub fn clear(&mut self) {
        self.map.clear();
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
    fn the_budget_bounds_what_is_held() {
        let mut c = Contents::default();
        let chunk = Bytes::from(vec![1u8; MAX_FILE as usize]);
        let per_budget = BUDGET / chunk.len();
        for ino in 0..(per_budget as u64 + 5) {
            c.insert(ino, chunk.clone());
            assert!(c.bytes <= BUDGET);
        }
        assert!(c.get(per_budget as u64 + 4).is_some(), "the newest is kept");
        assert!(c.map.len() < per_budget);
        c.insert(7, b("abc"));
        c.insert(7, b("abcdef"));
        assert_eq!(c.remove(7), Some(b("abcdef")));
        let held: usize = c.map.values().map(|d| d.len()).sum();
        assert_eq!(c.bytes, held, "the count follows replacements and removals");
        c.insert(8, Bytes::from(vec![0u8; MAX_FILE as usize + 1]));
        assert!(c.get(8).is_none());
    }
}
