//! Translating between the pipeline's types and fuser's. The one place where
//! an `FsError` becomes the errno FUSE answers.

use fuser::{Errno, FileAttr, FileType, INodeNo};
use std::ffi::OsStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use xlator::{Attr, FileKind, FsError, FsResult, Timestamp};

/// I/O size hint (`st_blksize`): the largest FUSE request we negotiate, so
/// tools that size their buffers by it make few, large requests.
pub const BLKSIZE: u32 = 1 << 20;
/// Longest file name a local file system accepts.
pub const NAME_MAX: usize = 255;

pub fn errno(e: FsError) -> Errno {
    Errno::from_i32(e.errno())
}

/// Names travel as UTF-8 strings through the pipeline and on the wire; a
/// name that is not UTF-8 is refused with EILSEQ rather than mangled.
pub fn name(n: &OsStr) -> FsResult<&str> {
    let s = n.to_str().ok_or(FsError::EILSEQ)?;
    if s.len() > NAME_MAX {
        return Err(FsError::ENAMETOOLONG);
    }
    Ok(s)
}

pub fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        // The kernel checks that a new node's type is the one it asked
        // for (EIO otherwise), and opens special files itself by this type.
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDev => FileType::CharDevice,
        FileKind::BlockDev => FileType::BlockDevice,
    }
}

pub fn time(t: Timestamp) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nsecs)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs()) + Duration::from_nanos(u64::from(t.nsecs))
    }
}

pub fn timestamp(t: SystemTime) -> Timestamp {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Timestamp { secs: d.as_secs() as i64, nsecs: d.subsec_nanos() },
        Err(e) => {
            let d = e.duration();
            // Round toward -inf so nsecs stays in 0..1e9.
            if d.subsec_nanos() == 0 {
                Timestamp { secs: -(d.as_secs() as i64), nsecs: 0 }
            } else {
                Timestamp { secs: -(d.as_secs() as i64) - 1, nsecs: 1_000_000_000 - d.subsec_nanos() }
            }
        }
    }
}

pub fn attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.fid.ino()),
        size: a.size,
        blocks: a.blocks,
        atime: time(a.atime),
        mtime: time(a.mtime),
        ctime: time(a.ctime),
        crtime: time(a.ctime),
        kind: kind(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// Attributes for "." and ".." in a READDIRPLUS reply: the kernel reads
/// neither (it takes no reference on them), so only the type matters.
pub fn dir_placeholder(ino: INodeNo) -> FileAttr {
    let t = std::time::UNIX_EPOCH;
    FileAttr {
        ino,
        size: 0,
        blocks: 0,
        atime: t,
        mtime: t,
        ctime: t,
        crtime: t,
        kind: FileType::Directory,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn names() {
        assert_eq!(name(OsStr::new("a.txt")), Ok("a.txt"));
        assert_eq!(name(OsStr::from_bytes(b"bad\xff")), Err(FsError::EILSEQ));
        assert_eq!(name(OsStr::new(&"x".repeat(256))), Err(FsError::ENAMETOOLONG));
        assert!(name(OsStr::new(&"x".repeat(255))).is_ok());
    }

    #[test]
    fn every_kind_keeps_its_type() {
        // The kernel answers EIO when a new node comes back with another
        // type than the mknod asked for (the old fifo-for-everything bug).
        let kinds = [
            (FileKind::File, FileType::RegularFile),
            (FileKind::Dir, FileType::Directory),
            (FileKind::Symlink, FileType::Symlink),
            (FileKind::Fifo, FileType::NamedPipe),
            (FileKind::Socket, FileType::Socket),
            (FileKind::CharDev, FileType::CharDevice),
            (FileKind::BlockDev, FileType::BlockDevice),
        ];
        for (k, t) in kinds {
            assert_eq!(kind(k), t, "{k:?}");
        }
    }

    #[test]
    fn times_round_trip() {
        for t in [Timestamp { secs: 0, nsecs: 0 }, Timestamp { secs: 1_700_000_000, nsecs: 5 }, Timestamp { secs: -2, nsecs: 700 }] {
            assert_eq!(timestamp(time(t)), t);
        }
    }
}
