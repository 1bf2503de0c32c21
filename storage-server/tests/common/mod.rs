//! Shared set-up: a real storage server on 127.0.0.1:0 over a temp export,
//! and a protocol-client talking to it over real TCP.
#![allow(dead_code)]

use protocol_client::{ClientOptions, ProtocolClient};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use storage_server::{Args, Server};
use tempfile::TempDir;
use xlator::*;

pub struct Env {
    pub _dir: TempDir,
    pub export: PathBuf,
    pub server: Server,
    pub c: ProtocolClient,
}

pub async fn env() -> Env {
    env_with(|_| {}).await
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A fresh, distinct file id.
pub fn fid() -> FileId {
    FileId::from_random(((std::process::id() as u128) << 64) | NEXT.fetch_add(1, Ordering::Relaxed) as u128)
}

pub fn nf(name: &str) -> NewFile {
    NewFile { name: name.into(), fid: fid(), perm: 0o644, owner: Owner { uid: 0, gid: 0 }, exclusive: true }
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

/// A small tmpfs (`size`, e.g. "1m"), mounted for a test and unmounted after.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
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

/// A server over `export` started with `args` changed by `set`, and a client.
pub async fn env_with(set: impl FnOnce(&mut Args)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let mut args = Args::new(&export);
    set(&mut args);
    let server = storage_server::start(args).await.unwrap();
    let opts = ClientOptions { op_timeout: Duration::from_secs(20), ..Default::default() };
    let c = protocol_client::connect(&server.addr.to_string(), opts).await.unwrap();
    Env { _dir: dir, export, server, c }
}
