//! Shared set-up for the posix tests: arguments, an export with a policy,
//! a tiny file system to fill, and this process's fds on deleted files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use xlator::*;

/// A fresh, distinct file id of the shape gateways draw.
pub fn fid() -> FileId {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    FileId::from_random(((std::process::id() as u128) << 64) | NEXT.fetch_add(1, Ordering::Relaxed) as u128)
}

/// Exclusive create of `name`, 0644, owned by root, with a fresh id.
pub fn nf(name: &str) -> NewFile {
    NewFile { name: name.into(), fid: fid(), perm: 0o644, owner: Owner { uid: 0, gid: 0 }, exclusive: true }
}

/// The same arguments with another id.
pub fn with_fid(new: &NewFile, fid: FileId) -> NewFile {
    NewFile { fid, ..new.clone() }
}

pub fn root() -> Loc {
    Loc::root()
}

pub fn at(path: &str, fid: FileId) -> Loc {
    Loc::new(path, Some(fid))
}

pub fn path(p: &str) -> Loc {
    Loc::new(p, None)
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

/// A small tmpfs (`size`, e.g. "1m"), mounted for a test and unmounted after.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},nr_inodes=1000"), "imca-test"])
            .arg(dir)
            .status()
            .expect("running mount(8)");
        assert!(st.success(), "mounting a test tmpfs failed (this test needs root)");
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
