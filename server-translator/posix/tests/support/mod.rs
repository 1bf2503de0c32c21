//! Shared set-up for the posix tests: arguments, an export with a policy,
//! a tiny file system to fill, and this process's fds on deleted files.
#![allow(dead_code, unused_imports)]

use std::path::Path;
use std::sync::Arc;
use xlator::*;

pub use testkit::{at, fid, nf, path, root, Tmpfs};

/// The same arguments with another id.
pub fn with_fid(new: &NewFile, fid: FileId) -> NewFile {
    NewFile { fid, ..new.clone() }
}

/// The posix leaf over `dir` with `policy`.
pub fn posix_with(dir: &Path, policy: posix::ExportPolicy) -> Arc<posix::PosixTranslator> {
    Arc::new(posix::PosixTranslator::new(posix::Posix::with_policy(dir, 64, policy).unwrap()))
}

pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// Fds of this process on files under `dir` that have no name left.
pub fn deleted_fds_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|t| t.to_string_lossy().to_string())
        .filter(|t| t.starts_with(&prefix) && t.ends_with(" (deleted)"))
        .collect()
}
