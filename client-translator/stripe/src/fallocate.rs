//! fallocate over a striped file: each server is sent only the extents of
//! the range that it holds (its units, clipped to the range), in one
//! request, so no server allocates space for another's units (the copies'
//! blocks still add up to the file's) nor zeroes bytes it does not hold.
//!
//! ```text
//!  range [offset, offset+len) over units u0 u1 u2 u3 …   (S = 2)
//!  server 0: fallocate(mode, [u0 ∩ range, u2, …])
//!  server 1: fallocate(mode, [u1, u3 ∩ range, …])
//! ```
//!
//! Size: without keep-size each copy grows to the end of its last extent,
//! and the server holding the range's last byte grows to `offset + len`;
//! the merged size (the largest copy's) is `max(size, offset + len)`, as
//! Linux's. A server that holds none of the range is not sent anything
//! (asked for its attributes, so the answer is the whole file's, merged).
//!
//! A server's share of a range over more than [`MAX_EXTENTS`] units goes
//! in several requests, one after the other (servers in parallel). A
//! punch or a keep-size zeroing that long is first clipped to the file's
//! size: past it there is nothing to punch, and a range to the largest
//! offset (`fallocate -p` of "everything") must not be cut into units.

use crate::merge::{all_ok, merge_attrs};
use crate::Stripe;
use futures::future::join_all;
use xlator::*;

impl Stripe {
    pub(crate) async fn fallocate_striped(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let servers = self.subvols.len() as u64;
        let mut ranges = ranges.to_vec();
        let units: u64 = ranges.iter().map(|r| r.len / self.unit + 2).sum();
        if mode.zeroes() && mode.keep_size && units / servers > MAX_EXTENTS as u64 {
            let size = xlator::Translator::getattr(self, loc).await?.size;
            ranges = ranges.into_iter().filter_map(|r| clip(r, size)).collect();
        }
        let all = join_all((0..self.subvols.len()).map(|k| self.fallocate_on(k, loc, mode, &ranges))).await;
        merge_attrs(all_ok(all)?)
    }

    /// Server `k`'s share of `ranges`; its copy's attributes after.
    async fn fallocate_on(&self, k: usize, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let (s, servers) = (&self.subvols[k], self.subvols.len() as u64);
        let mut share = Shares { ranges: ranges.iter(), now: None, unit: self.unit, servers, k: k as u64 }.peekable();
        if share.peek().is_none() {
            return s.getattr(loc).await;
        }
        let mut after = Err(FsError::EIO);
        while share.peek().is_some() {
            let batch: Vec<Extent> = share.by_ref().take(MAX_EXTENTS).collect();
            after = Ok(s.fallocate(loc, mode, &batch).await?);
        }
        after
    }
}

/// `r` cut at `size` (None when nothing of it is left).
fn clip(r: Extent, size: u64) -> Option<Extent> {
    let end = r.end()?.min(size);
    (end > r.offset).then(|| Extent { offset: r.offset, len: end - r.offset })
}

/// The extents of one range that server `k` of `servers` holds, in file
/// order, made as they are asked for (a long range is never held whole).
struct Share {
    next: u64,
    end: u64,
    unit: u64,
    servers: u64,
    /// the unit to visit next (one of server k's)
    at: u64,
}

impl Share {
    fn new(r: Extent, unit: u64, servers: u64, k: u64) -> Share {
        let end = r.offset.saturating_add(r.len);
        let first = r.offset / unit;
        // server k's first unit at or after the range's first
        let at = first + (k + servers - first % servers) % servers;
        Share { next: r.offset, end, unit, servers, at }
    }
}

/// [`Share`]s of several ranges, one after the other (no closure: the
/// iterator lives across awaits of a `Send` future).
struct Shares<'a> {
    ranges: std::slice::Iter<'a, Extent>,
    now: Option<Share>,
    unit: u64,
    servers: u64,
    k: u64,
}

impl Iterator for Shares<'_> {
    type Item = Extent;

    fn next(&mut self) -> Option<Extent> {
        loop {
            if let Some(e) = self.now.as_mut().and_then(Iterator::next) {
                return Some(e);
            }
            self.now = Some(Share::new(*self.ranges.next()?, self.unit, self.servers, self.k));
        }
    }
}

impl Iterator for Share {
    type Item = Extent;

    fn next(&mut self) -> Option<Extent> {
        let start = self.at.checked_mul(self.unit)?.max(self.next);
        if start >= self.end {
            return None;
        }
        // one server holds every unit: the rest of the range is one extent
        let stop = match self.servers {
            1 => self.end,
            _ => self.at.saturating_add(1).saturating_mul(self.unit).min(self.end),
        };
        self.at = self.at.saturating_add(self.servers);
        self.next = stop;
        Some(Extent { offset: start, len: stop - start })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(offset: u64, len: u64, unit: u64, servers: u64, k: u64) -> Vec<(u64, u64)> {
        Share::new(Extent { offset, len }, unit, servers, k).map(|e| (e.offset, e.len)).collect()
    }

    #[test]
    fn each_server_gets_its_units_clipped_to_the_range() {
        assert_eq!(share(100, 300, 128, 3, 0), vec![(100, 28), (384, 16)]);
        assert_eq!(share(100, 300, 128, 3, 1), vec![(128, 128)]);
        assert_eq!(share(100, 300, 128, 3, 2), vec![(256, 128)]);
        // a server holding none of a short range gets nothing
        assert_eq!(share(10, 20, 128, 3, 1), vec![]);
        // one server: the whole range, one extent
        assert_eq!(share(5, 1 << 40, 128, 1, 0), vec![(5, 1 << 40)]);
    }

    #[test]
    fn the_shares_cover_the_range_exactly_once() {
        for (offset, len, unit, s) in [(0u64, 1u64, 64u64, 2u64), (63, 2, 64, 2), (1000, 100_000, 4096, 3), (5 << 32, 999_999, 131072, 4)] {
            let mut all: Vec<(u64, u64)> = (0..s).flat_map(|k| share(offset, len, unit, s, k)).collect();
            all.sort();
            assert_eq!(all.iter().map(|e| e.1).sum::<u64>(), len);
            for w in all.windows(2) {
                assert_eq!(w[0].0 + w[0].1, w[1].0);
            }
            assert_eq!(all[0].0, offset);
            for k in 0..s {
                for (o, l) in share(offset, len, unit, s, k) {
                    assert_eq!((o / unit) % s, k);
                    assert_eq!((o + l - 1) / unit, o / unit);
                }
            }
        }
    }

    #[test]
    fn a_range_to_the_largest_offset_is_made_lazily() {
        let mut s = Share::new(Extent { offset: 0, len: i64::MAX as u64 }, 4096, 2, 1);
        assert_eq!(s.next(), Some(Extent { offset: 4096, len: 4096 }));
        assert_eq!(s.next(), Some(Extent { offset: 3 * 4096, len: 4096 }));
    }

    #[test]
    fn clipping_at_the_size() {
        assert_eq!(clip(Extent { offset: 10, len: 100 }, 50), Some(Extent { offset: 10, len: 40 }));
        assert_eq!(clip(Extent { offset: 60, len: 100 }, 50), None);
    }
}
