//! Combining what several servers answered into one answer (the
//! attribute rule itself is xlator's `merge.rs`, shared with the gateway).

use xlator::{Attr, FsError, FsResult, StatFs};

/// The volume's view of a file from each server's view of its copy, in
/// server order: the merge rule is xlator's ([`Attr::merge_copy`]); here
/// only the check that every server answered for the same file.
pub fn merge_attrs(attrs: Vec<Attr>) -> FsResult<Attr> {
    let mut it = attrs.into_iter();
    let mut out = it.next().ok_or(FsError::EIO)?;
    for a in it {
        if a.fid != out.fid {
            tracing::error!(first = %out.fid, other = %a.fid, "storage servers disagree on a file id");
            return Err(FsError::EIO);
        }
        out.merge_copy(&a);
    }
    Ok(out)
}

/// An object's attributes just after a namespace change (a directory a
/// name was added to or removed from, what a rename moved), from every
/// server's copy in its answer (server order): what stripe's getattr of it
/// would answer then — server 0's copy when it is known as a directory
/// (`known_dir`: a directory's attributes are the same on every server,
/// see `kinds`), else every copy merged as [`merge_attrs`] does. None when
/// a server gave no copy or the copies are of different objects: the
/// gateway then asks, as before such answers carried them.
pub fn merge_after_change(copies: Vec<Option<Attr>>, known_dir: bool) -> Option<Attr> {
    let all: Vec<Attr> = copies.into_iter().collect::<Option<_>>()?;
    let first = all.first()?;
    if all.iter().any(|a| a.fid != first.fid) {
        return None;
    }
    if known_dir {
        return all.into_iter().next();
    }
    merge_attrs(all).ok()
}

/// Capacity adds up over servers; counts are expressed in the first server's
/// fragment size.
pub fn merge_statfs(all: Vec<StatFs>) -> FsResult<StatFs> {
    let mut it = all.into_iter();
    let mut out = it.next().ok_or(FsError::EIO)?;
    let frsize = u64::from(out.frsize.max(1));
    for s in it {
        let scale = |v: u64| v.saturating_mul(u64::from(s.frsize.max(1))) / frsize;
        out.blocks += scale(s.blocks);
        out.bfree += scale(s.bfree);
        out.bavail += scale(s.bavail);
        out.files += s.files;
        out.ffree += s.ffree;
        out.namelen = out.namelen.min(s.namelen);
    }
    Ok(out)
}

/// One failing server fails the operation. A server that is down (EIO) is the
/// most useful thing to report; otherwise the first server's error.
pub fn pick_error(errors: impl IntoIterator<Item = FsError>) -> FsError {
    let mut first = None;
    for e in errors {
        if e == FsError::EIO {
            return e;
        }
        first.get_or_insert(e);
    }
    first.unwrap_or(FsError::EIO)
}

/// All results or the chosen error.
pub fn all_ok<T>(results: Vec<FsResult<T>>) -> FsResult<Vec<T>> {
    if results.iter().any(|r| r.is_err()) {
        return Err(pick_error(results.into_iter().filter_map(|r| r.err())));
    }
    Ok(results.into_iter().map(|r| r.unwrap_or_else(|_| unreachable!())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator::{FileId, FileKind, Timestamp};

    fn attr(size: u64, blocks: u64, mtime: i64) -> Attr {
        Attr {
            fid: FileId(7),
            kind: FileKind::File,
            size,
            blocks,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: Timestamp::default(),
            mtime: Timestamp { secs: mtime, nsecs: 0 },
            ctime: Timestamp::default(),
        }
    }

    #[test]
    fn size_is_max_blocks_sum_times_latest() {
        let m = merge_attrs(vec![attr(10, 8, 5), attr(300, 16, 9), attr(0, 0, 1)]).unwrap();
        assert_eq!((m.size, m.blocks, m.mtime.secs), (300, 24, 9));
    }

    #[test]
    fn disagreeing_ids_are_an_io_error() {
        let mut b = attr(1, 1, 1);
        b.fid = FileId(8);
        assert_eq!(merge_attrs(vec![attr(1, 1, 1), b]), Err(FsError::EIO));
    }

    #[test]
    fn a_directory_after_a_change_needs_every_servers_copy() {
        let dir = |mtime| Attr { kind: FileKind::Dir, ..attr(4096, 8, mtime) };
        let (s0, s1) = (dir(5), dir(9));
        assert_eq!(merge_after_change(vec![Some(s0.clone()), Some(s1.clone())], true), Some(s0.clone()), "known: server 0's, as its getattr");
        let merged = merge_after_change(vec![Some(s0.clone()), Some(s1.clone())], false).unwrap();
        assert_eq!((merged.mtime.secs, merged.blocks), (9, 16), "not known: merged, as its getattr");
        for known in [true, false] {
            assert_eq!(merge_after_change(vec![Some(s0.clone()), None], known), None, "a follower without its copy");
            assert_eq!(merge_after_change(vec![None, Some(s1.clone())], known), None, "server 0 without its copy");
            let other = Attr { fid: FileId(8), ..s1.clone() };
            assert_eq!(merge_after_change(vec![Some(s0.clone()), Some(other)], known), None, "copies of different objects");
        }
        assert_eq!(merge_after_change(vec![], true), None);
    }

    #[test]
    fn eio_wins_over_other_errors() {
        assert_eq!(pick_error([FsError::ENOENT, FsError::EIO]), FsError::EIO);
        assert_eq!(pick_error([FsError::ENOENT, FsError::EEXIST]), FsError::ENOENT);
    }

    #[test]
    fn statfs_sums_in_common_units() {
        let a = StatFs { blocks: 100, bfree: 50, bavail: 40, files: 10, ffree: 5, bsize: 4096, namelen: 255, frsize: 4096 };
        let b = StatFs { blocks: 800, bfree: 400, bavail: 320, files: 10, ffree: 5, bsize: 512, namelen: 255, frsize: 512 };
        let m = merge_statfs(vec![a, b]).unwrap();
        assert_eq!((m.blocks, m.bfree, m.bavail, m.files), (200, 100, 80, 20));
    }
}
