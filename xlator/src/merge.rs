//! THE stripe attribute merge, in one place: a striped file's attributes
//! are its copies' merged. Size is the largest copy's (copies are sparse),
//! blocks add up, times are the latest; identity and permissions are server
//! 0's. Stripe merges every server's answer with it ([`Attr::merge_copy`]);
//! after a write, [`WriteReply::attr_after`] redoes it from the attributes
//! before and the write's reply, without asking every server again.
//!
//! A write changes only the copies it reaches, and on them only size,
//! blocks and times (a server without CAP_FSETID drops set-id bits too: a
//! reply whose permissions differ from those before gives nothing). The
//! reply carries what those copies were after and their blocks before, so
//! the merge can be redone from the attributes before: size and times as
//! the larger, blocks moved by what the write added. The gateway uses it to
//! keep the attributes it answered with across its own writes (`coherence::memo`).

use crate::{Attr, WriteReply};

impl Attr {
    /// Folds one more copy into the merged attributes (`self`, which began
    /// as server 0's): size the larger, blocks added up, times the latest.
    pub fn merge_copy(&mut self, copy: &Attr) {
        self.blocks += copy.blocks;
        self.merge_size_and_times(copy);
    }

    /// Size the larger of the two, times the latest: what the merge takes
    /// from a copy besides its blocks (for a caller that counts blocks its
    /// own way, as a write's do).
    pub fn merge_size_and_times(&mut self, copy: &Attr) {
        self.size = self.size.max(copy.size);
        self.atime = self.atime.max(copy.atime);
        self.mtime = self.mtime.max(copy.mtime);
        self.ctime = self.ctime.max(copy.ctime);
    }

    /// Whether `other` is this object with only what a write changes
    /// (size, blocks, times) possibly different: same id, kind,
    /// permissions and owner. A write's reply that disagrees on these says
    /// that something else changed the file meanwhile.
    pub fn same_but_written(&self, other: &Attr) -> bool {
        let kept = |a: &Attr| (a.fid, a.kind, a.perm, a.uid, a.gid);
        kept(self) == kept(other)
    }
}

impl WriteReply {
    /// The attributes after this write of a file whose attributes (merged
    /// over every copy) were `before` just before it; None when the reply
    /// does not say enough, or says the write changed more than a write
    /// does (another change came in between: `before` no longer holds).
    pub fn attr_after(&self, before: &Attr) -> Option<Attr> {
        let (after, blocks_before) = (self.attr.as_ref()?, self.blocks_before?);
        if !before.same_but_written(after) {
            return None;
        }
        let added = i128::from(after.blocks) - i128::from(blocks_before);
        let blocks = u64::try_from(i128::from(before.blocks) + added).ok()?;
        let mut merged = Attr { blocks, ..before.clone() };
        merged.merge_size_and_times(after);
        Some(merged)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Attr, FileId, FileKind, Timestamp, WriteReply};

    fn attr(size: u64, blocks: u64, mtime: i64) -> Attr {
        let t = |secs| Timestamp { secs, nsecs: 0 };
        Attr {
            fid: FileId(9),
            kind: FileKind::File,
            size,
            blocks,
            perm: 0o644,
            nlink: 1,
            uid: 1000,
            gid: 1000,
            rdev: 0,
            atime: t(1),
            mtime: t(mtime),
            ctime: t(mtime),
        }
    }

    fn reply(after: Attr, blocks_before: u64) -> WriteReply {
        WriteReply { written: 1, attr: Some(after), size_before: None, blocks_before: Some(blocks_before) }
    }

    #[test]
    fn size_grows_to_the_larger_blocks_by_what_was_added_times_to_the_latest() {
        // The file: 3 copies, 24 blocks, 100 bytes; the write reached one
        // copy (8 blocks before, 16 after; 40 bytes now).
        let before = attr(100, 24, 5);
        let a = reply(attr(40, 16, 7), 8).attr_after(&before).unwrap();
        assert_eq!((a.size, a.blocks, a.mtime.secs, a.ctime.secs, a.atime.secs), (100, 32, 7, 7, 1));
        // ... or past the end.
        let a = reply(attr(300, 16, 7), 8).attr_after(&before).unwrap();
        assert_eq!((a.size, a.blocks), (300, 32));
        // An overwrite allocating nothing moves only the times.
        let a = reply(attr(40, 8, 6), 8).attr_after(&before).unwrap();
        assert_eq!(a, Attr { mtime: Timestamp { secs: 6, nsecs: 0 }, ctime: Timestamp { secs: 6, nsecs: 0 }, ..before });
    }

    #[test]
    fn copies_merge_to_size_max_blocks_sum_times_latest() {
        let mut m = attr(10, 8, 5);
        for copy in [attr(300, 16, 9), attr(0, 0, 1)] {
            m.merge_copy(&copy);
        }
        assert_eq!((m.size, m.blocks, m.mtime.secs, m.uid), (300, 24, 9, 1000));
    }

    #[test]
    fn a_reply_that_does_not_say_enough_or_disagrees_gives_nothing() {
        let before = attr(100, 24, 5);
        let mut r = reply(attr(40, 16, 7), 8);
        r.blocks_before = None;
        assert_eq!(r.attr_after(&before), None);
        assert_eq!(WriteReply { attr: None, ..reply(attr(40, 16, 7), 8) }.attr_after(&before), None);
        assert_eq!(reply(Attr { perm: 0o600, ..attr(40, 16, 7) }, 8).attr_after(&before), None, "changed meanwhile");
        assert_eq!(reply(Attr { fid: FileId(10), ..attr(40, 16, 7) }, 8).attr_after(&before), None);
        assert_eq!(reply(attr(40, 0, 7), 30).attr_after(&before), None, "more blocks gone than the file had");
    }
}
