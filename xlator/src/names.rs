//! What a client may call a file, and the one directory it may not reach.
//! The storage leaves (posix on disk, memory in RAM) both check names and
//! paths here, in the same order, so they fail a call with the same errno.
//! Pure logic: no I/O.

use crate::{FileId, FsError, FsResult};

/// The storage leaf keeps its own state in this directory at the export
/// root; clients can neither see it nor create it.
pub const META_DIR: &str = ".imca";

/// Longest name, in bytes (Linux's NAME_MAX).
pub const NAME_MAX: usize = 255;

/// A single name as a client may use it.
pub fn check_name(name: &str) -> FsResult<()> {
    if name.len() > NAME_MAX {
        return Err(FsError::ENAMETOOLONG);
    }
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(FsError::EINVAL);
    }
    Ok(())
}

/// A relative path as a client may send it: `a/b/c`, no `.`/`..`/empty
/// parts, nothing under the hidden [`META_DIR`]. Of any length: a tree has
/// no depth limit (the transport's frame limit bounds what one request
/// carries; posix opens a long path a PATH_MAX run at a time).
pub fn check_path(path: &str) -> FsResult<()> {
    if path.is_empty() {
        return Ok(());
    }
    for (i, c) in path.split('/').enumerate() {
        check_name(c)?;
        if i == 0 && c == META_DIR {
            return Err(FsError::ENOENT);
        }
    }
    Ok(())
}

/// Whether `name` in directory `dir` is the hidden [`META_DIR`]: a lookup
/// of it finds nothing (ENOENT) and a listing leaves it out.
pub fn is_hidden(dir: FileId, name: &str) -> bool {
    dir == FileId::ROOT && name == META_DIR
}

/// A name that may be created or renamed to inside directory `dir`.
pub fn check_new_name(dir: FileId, name: &str) -> FsResult<()> {
    check_name(name)?;
    if is_hidden(dir, name) {
        return Err(FsError::EPERM);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert_eq!(check_name(&"x".repeat(255)), Ok(()));
        assert_eq!(check_name(&"x".repeat(256)), Err(FsError::ENAMETOOLONG));
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert_eq!(check_name(bad), Err(FsError::EINVAL), "{bad:?}");
        }
        assert_eq!(check_path(""), Ok(()));
        assert_eq!(check_path("a/b/.imca"), Ok(()));
        assert_eq!(check_path(".imca/fids"), Err(FsError::ENOENT));
        assert_eq!(check_path("a//b"), Err(FsError::EINVAL));
        assert_eq!(check_new_name(FileId::ROOT, ".imca"), Err(FsError::EPERM));
        assert_eq!(check_new_name(FileId(5), ".imca"), Ok(()));
    }
}
