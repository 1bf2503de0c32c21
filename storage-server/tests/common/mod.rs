//! Shared set-up: a real storage server on 127.0.0.1:0 over a temp export,
//! and a protocol-client talking to it over real TCP.
#![allow(dead_code, unused_imports)]

use protocol_client::{ClientOptions, ProtocolClient};
use std::path::PathBuf;
use std::time::Duration;
use storage_server::{Args, Server};
use tempfile::TempDir;

pub use testkit::{at, fid, nf, path, root, Tmpfs};

pub struct Env {
    pub _dir: TempDir,
    pub export: PathBuf,
    pub server: Server,
    pub c: ProtocolClient,
}

pub async fn env() -> Env {
    env_with(|_| {}).await
}

/// The volume secret of every test server here (credentials are on, as by
/// default; only the tests about authentication use another).
pub fn secret() -> secret::Secret {
    secret::Secret::from_bytes(&[0x5e; 32]).unwrap()
}

/// The handshake key that goes with [`secret`].
pub fn key() -> secret::Key {
    secret().key(secret::Purpose::RpcHandshake)
}

/// A server's arguments for `export`, with the test volume's secret.
pub fn args(export: impl Into<PathBuf>) -> Args {
    Args { credentials: daemon::Credentials::with(secret()), ..Args::new(export) }
}

/// A gateway's client options, with the test volume's key.
pub fn opts() -> ClientOptions {
    ClientOptions { auth: Some(key()), ..Default::default() }
}

/// A server over `export` started with `args` changed by `set`, and a client.
pub async fn env_with(set: impl FnOnce(&mut Args)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let mut args = self::args(&export);
    set(&mut args);
    let server = storage_server::start(args).await.unwrap();
    let opts = ClientOptions { op_timeout: Duration::from_secs(20), ..opts() };
    let c = protocol_client::connect(&server.addr.to_string(), opts).await.unwrap();
    Env { _dir: dir, export, server, c }
}

/// Wait until a removed and released file is gone by id (ENOENT): posix
/// holds it a moment after its last name went (two kernel leases), for
/// opens on their way from gateways; until then it answers with nlink 0.
pub async fn gone_by_id(c: &protocol_client::ProtocolClient, loc: &xlator::Loc) {
    use xlator::Translator;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match c.getattr(loc).await {
            Err(e) => return assert_eq!(e, xlator::FsError::ENOENT),
            Ok(a) => assert_eq!(a.nlink, 0, "held, with no name"),
        }
        assert!(std::time::Instant::now() < deadline, "a released, removed file still reachable by id after 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
