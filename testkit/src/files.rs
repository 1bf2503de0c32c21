//! Small builders for operation arguments.

use std::sync::atomic::{AtomicU64, Ordering};
use xlator::*;

/// A file id no other call in this process got.
pub fn fid() -> FileId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    FileId::from_random(((std::process::id() as u128) << 64) | NEXT.fetch_add(1, Ordering::Relaxed) as u128)
}

/// Arguments to create `name` (mode 0644, root's, not exclusive) with a fresh id.
pub fn new_file(name: &str) -> NewFile {
    NewFile { name: name.into(), fid: fid(), perm: 0o644, owner: Owner::default(), exclusive: false }
}

/// Exclusive create of `name` (mode 0644, root's) with a fresh id.
pub fn nf(name: &str) -> NewFile {
    NewFile { exclusive: true, ..new_file(name) }
}

pub fn root() -> Loc {
    Loc::root()
}

/// `path` with its id known (how data calls arrive).
pub fn at(path: &str, fid: FileId) -> Loc {
    Loc::new(path, Some(fid))
}

/// `path` alone.
pub fn path(p: &str) -> Loc {
    Loc::new(p, None)
}
