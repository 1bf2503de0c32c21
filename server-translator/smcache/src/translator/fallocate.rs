//! SMCache's fallocate: a write of zeros, or of nothing, over this server's
//! extents, with the bank changed as for a write that may also extend.
//!
//! Under the file's exclusive lock (no populate slips between the disk
//! operation and the bank change), after the disk operation, before the
//! reply: the file's stat goes (size, blocks, times changed); when the
//! bytes turned to zeros (punch hole, zero range) every block the extents
//! cover inside the copy's old size goes too. Deleted, not rewritten: a
//! delete is always safe, and the next read populates the block from disk.
//! Blocks past the copy's old size hold nothing or a short payload, which
//! already reads as zeros up to the size (as after a truncate that extends),
//! and an allocation changes no byte, so neither is touched. A file none of
//! whose blocks were ever stored (`never_cached`) has none to delete.

use super::SmCache;
use crate::bank_changes::{Change, K};
use crate::layouts::Layout;
use xlator::*;

impl SmCache {
    pub(super) async fn fallocate_here(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return self.below.fallocate(loc, mode, ranges).await };
        // a call by path still changes blocks keyed by the file's id
        let fid = i.fid_of(loc).await?;
        let _g = i.order.exclusive(fid).await;
        let old = match mode.zeroes() && !i.never_cached.contains(fid) {
            true => Some(self.below.getattr(loc).await?.size),
            false => None,
        };
        let r = self.below.fallocate(loc, mode, ranges).await?;
        let mut ch = vec![Change::Del(K::Stat(fid))];
        if let Some(old) = old {
            zeroed_blocks(&l, fid, ranges, old, &mut ch);
        }
        i.commit(&l, ch, "update").await?;
        Ok(r)
    }
}

/// Deletes of the blocks `ranges` cover below `old`, the copy's size before.
fn zeroed_blocks(l: &Layout, fid: FileId, ranges: &[Extent], old: u64, out: &mut Vec<Change>) {
    let mut last_deleted = None;
    for e in ranges {
        let end = e.end().unwrap_or(u64::MAX).min(old);
        let Some((first, last)) = l.keys.covering(e.offset, end.saturating_sub(e.offset)) else { continue };
        // neighbouring extents of a small unit may share a block
        let first = last_deleted.map_or(first, |d: u64| first.max(d + 1));
        out.extend((first..=last).map(|n| Change::Del(K::Block(fid, n))));
        last_deleted = Some(last.max(last_deleted.unwrap_or(0)));
    }
}
