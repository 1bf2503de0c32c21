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
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let server = storage_server::start(Args::new(&export)).await.unwrap();
    let opts = ClientOptions { op_timeout: Duration::from_secs(20), ..Default::default() };
    let c = protocol_client::connect(&server.addr.to_string(), opts).await.unwrap();
    Env { _dir: dir, export, server, c }
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
