//! # memory — a leaf translator that keeps a whole file tree in memory
//!
//! ```text
//!  [translator under test, e.g. SMCache, CMCache -> SMCache] -> memory
//!                                                  (instead of posix over an export dir)
//! ```
//!
//! A stand-in for `posix` in translator tests: no export directory, no
//! blocking pool, no syscalls, so a test can run thousands of operations in
//! milliseconds and count exactly which calls reached the leaf
//! ([`Memory::calls`], per [`xlator::Fop`]).
//!
//! It answers like posix (the reference; `tests/differential/` runs the
//! same random operations against both and compares every answer):
//!
//! - the same errnos in the same order of checks (ENOENT, EEXIST, ENOTDIR,
//!   EISDIR, ENOTEMPTY, ENAMETOOLONG, EINVAL for bad names, ELOOP for a
//!   symlink on the way, the hidden `.imca` at the root);
//! - file ids are the caller's (`NewFile::fid`), but a new object's id must
//!   be new (EEXIST if any object, an unlinked open file included, holds it;
//!   EINVAL if it is not the shape `FileId::from_random` makes); a `Loc` is
//!   resolved by its id first for non-directories (posix's per-fid hard
//!   link), else by path, and a path holding another id than the one asked
//!   for is ENOENT;
//! - posix's default export policy: no device nodes (EPERM), set-id bits
//!   dropped from every mode a client sets;
//! - rename with `noreplace` / `exchange` and the kernel's ancestor rules,
//!   hard links and `nlink` (directories: 2 + subdirectories), `user.*`
//!   xattrs only, readdir cookies that survive inserts and removals, reads
//!   short only at end of file;
//! - posix's fd cache, as if it never evicted: a file once opened, created,
//!   read, written or truncated is found by id first; one with opens not yet
//!   released (open, create) stays reachable by id after its last name is
//!   gone, until its last `release`; one without is gone with its name.
//!
//! Not modelled: permissions (every caller is root), sparse allocation
//! (`blocks` counts every byte), set-id bits cleared by chown, a fifo that
//! blocks on fsync. Files are capped at [`MAX_FILE`] bytes (EFBIG beyond):
//! the data is really held in memory.
//!
//! Task model: one mutex around the tree, held for one operation, never
//! across an await; calls answer on the caller's task.

mod calls;
mod copy_range;
mod data;
mod dir;
mod fallocate;
mod namespace;
mod rename;
mod translator;
mod tree;
mod xattr;

pub use translator::Memory;

use std::sync::Arc;

/// Largest single read (posix's limit too).
pub const MAX_READ: u32 = 32 * 1024 * 1024;
/// Largest file this leaf keeps (its bytes live in this process).
pub const MAX_FILE: u64 = 256 * 1024 * 1024;

/// Convenience: an empty tree as a translator.
pub fn memory() -> Arc<Memory> {
    Arc::new(Memory::new())
}
