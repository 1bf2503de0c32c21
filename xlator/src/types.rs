//! Operation arguments and replies. Plain data, `Clone`, no I/O.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;

mod falloc;
pub use falloc::{Extent, FallocMode, FallocOp, MAX_EXTENTS};

/// A file's identity: 128 bits chosen by the gateway at create time and kept
/// with the file on every storage server (xattr `user.imca.fid`). Cache keys
/// are built from it, never from paths.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct FileId(pub u128);

impl FileId {
    /// The export root has a fixed id on every server.
    pub const ROOT: FileId = FileId(1);

    /// A fresh random id (never ROOT, never zero).
    pub fn from_random(r: u128) -> FileId {
        FileId(r | (1u128 << 127))
    }

    /// The FUSE inode number for this file: its low 64 bits (ROOT maps to 1).
    pub fn ino(self) -> u64 {
        if self == FileId::ROOT {
            1
        } else {
            // Avoid colliding with the root inode; the top bit is always set.
            (self.0 as u64) | (1 << 63)
        }
    }

    pub fn to_hex(self) -> String {
        format!("{:032x}", self.0)
    }

    pub fn from_hex(s: &str) -> Option<FileId> {
        if s.len() != 32 {
            return None;
        }
        u128::from_str_radix(s, 16).ok().map(FileId)
    }
}

impl fmt::Debug for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fid:{}", self.to_hex())
    }
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Where an operation applies: the path relative to the export root (`""` is
/// the root, components separated by `/`, never `..`) plus the file id when the
/// caller knows it. Data operations (read, write, fsync, setattr on an open
/// file) should resolve by `fid`, which survives renames by other gateways;
/// namespace operations resolve by `path`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Loc {
    pub path: String,
    pub fid: Option<FileId>,
}

impl Loc {
    pub fn root() -> Loc {
        Loc { path: String::new(), fid: Some(FileId::ROOT) }
    }

    pub fn new(path: impl Into<String>, fid: Option<FileId>) -> Loc {
        Loc { path: path.into(), fid }
    }

    /// The location of `name` inside this directory (fid unknown).
    pub fn child(&self, name: &str) -> Loc {
        let path = if self.path.is_empty() { name.to_string() } else { format!("{}/{}", self.path, name) };
        Loc { path, fid: None }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// The special files: stored and listed like any other object, never
    /// read or written through the pipeline (the gateway's kernel opens
    /// them as the local fifo, socket or device their type and `rdev` name).
    Fifo,
    Socket,
    CharDev,
    BlockDev,
}

impl FileKind {
    /// A fifo, socket or device node (no data of its own on the servers).
    pub fn is_special(self) -> bool {
        matches!(self, FileKind::Fifo | FileKind::Socket | FileKind::CharDev | FileKind::BlockDev)
    }
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Timestamp {
    pub secs: i64,
    pub nsecs: u32,
}

/// A file's attributes as one storage server (or, after the stripe translator
/// merges them, the whole volume) sees it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Attr {
    pub fid: FileId,
    pub kind: FileKind,
    pub size: u64,
    /// 512-byte blocks allocated
    pub blocks: u64,
    /// permission bits incl. suid/sgid/sticky (no file-type bits)
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum TimeSet {
    Now,
    At(Timestamp),
}

/// What a setattr changes; `None` leaves a field alone.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct SetAttr {
    pub perm: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// truncate (or extend) to this size
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
}

/// Who asks: the new file's owner on create, mkdir, symlink, mknod.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Arguments of create/mkdir/symlink: the name, the id chosen by the gateway,
/// permission bits (umask already applied) and owner.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct NewFile {
    pub name: String,
    pub fid: FileId,
    pub perm: u32,
    pub owner: Owner,
    /// create only: fail with EEXIST if the name exists (O_EXCL)
    pub exclusive: bool,
}

/// One directory entry. `next` is the cookie to continue listing after it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub kind: FileKind,
    pub fid: FileId,
    pub next: u64,
    /// filled by readdirplus
    pub attr: Option<Attr>,
}

/// One name of a directory, without its object: what `names` lists.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct DirName {
    pub name: String,
    /// the cookie to continue listing after it (as [`DirEntry::next`])
    pub next: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct StatFs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// rename(2) flags that the pipeline honours.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
}

/// setxattr(2) flags.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct XattrFlags {
    pub create: bool,
    pub replace: bool,
}

/// Result of a write: bytes written and, when the layer below knows them,
/// the attributes after the write, and the size and blocks just before it.
///
/// From a storage server these describe its copy of the file: the size
/// before lets stripe cut back an extension that a partly failed write left
/// behind (docs/design.md, "partial writes"). Above stripe they describe the
/// copies the write reached, merged (the others are not in them: the
/// volume's attributes come from [`WriteReply::attr_after`] applied to the
/// attributes before).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WriteReply {
    pub written: u32,
    pub attr: Option<Attr>,
    pub size_before: Option<u64>,
    pub blocks_before: Option<u64>,
}

/// Read payloads travel as `Bytes` so a block can go from socket buffer to
/// FUSE reply without copies.
pub type Data = Bytes;

/// What a lock request asks for (fcntl's `l_type`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum LockType {
    Read,
    Write,
    Unlock,
}

/// Which family a lock belongs to: POSIX byte-range locks (fcntl, lockf and
/// OFD locks; an OFD lock's owner is its open file) or BSD `flock`. The two
/// families never conflict with each other, as on a local Linux file system.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum LockKind {
    Posix,
    Flock,
    /// The gateways' own: held on a file's ordering server while an
    /// `O_APPEND` write reads the size and writes there, so appends through
    /// different gateways take turns. No application request ever carries
    /// it, so it conflicts only with other appends.
    Append,
}

/// The last byte of a lock that runs to the end of the file, however long it
/// grows (the kernel's OFFSET_MAX).
pub const LOCK_TO_EOF: u64 = i64::MAX as u64;

/// A byte-range lock as the getlk/setlk operations carry it. The owner is
/// the FUSE lock owner; the storage server pairs it with the session (the
/// gateway) the request came in, so owners of different gateways never mix.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Lock {
    pub kind: LockKind,
    pub typ: LockType,
    /// first byte
    pub start: u64,
    /// last byte, inclusive ([`LOCK_TO_EOF`]: to the end of the file)
    pub end: u64,
    pub owner: u64,
    /// the holder's process id on its gateway (what F_GETLK reports)
    pub pid: u32,
}
