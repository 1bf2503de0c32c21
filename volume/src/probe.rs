//! Is there a memcached-compatible node at this address? One `version`
//! round trip with a deadline, before a node joins the pool: adding an
//! unreachable node would turn a share of every lookup into a timeout.
//! Also `stats settings` (the nodes' item limit, a [`Limits`] of every
//! change), `stats` (for the status page) and `flush_all` (for the flush
//! endpoint and readmitting fenced nodes), spoken directly so they work on
//! any memcached-compatible node, outside the bank and its epochs.
//!
//! Requests are composed and answers parsed by `cache_proto::client`, the
//! bank's own protocol half: an answer line is bounded (`MAX_LINE`), so a
//! node that streams garbage costs a clear error, not memory.
//!
//! Nodes that run memcached's ASCII authentication (`-Y`) are probed after
//! the same login the daemon's banks send ([`set_login`]: the volume's, or
//! `--cache-auth-file`). Unless the daemon allows open nodes
//! ([`refuse_open_nodes`] not called), a probe first asks for a key without
//! the login, and a node that answers is refused: it would take anyone's
//! writes, so it may neither join the pool nor be readmitted after a fence.

use crate::limits::DEFAULT_ITEM_LIMIT;
use crate::{Invalid, Limits};
use cache_proto::client::{self, Parsed};
use cache_proto::response::{Response, Status};
use cache_proto::text::Command;
use std::collections::HashMap;
use std::io;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The login command every probe sends first (none = no login).
static LOGIN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

/// Log in with `command` (memcached's `set <key> 0 -1 <n>\r\n<user> <password>\r\n`,
/// see `cache_bank::Credentials`) before every probe of this process. Once
/// per process; later calls are ignored.
pub fn set_login(command: Vec<u8>) {
    let _ = LOGIN.set(command);
}

/// Refuse nodes that serve requests without a login (set once, at start).
static REFUSE_OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, every probe of this process refuses a node that answers a
/// request made without a login.
pub fn refuse_open_nodes() {
    REFUSE_OPEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Asked first, alone (memcached drops the answer to a command pipelined
/// before a login), when open nodes are refused: `END` means no login is needed.
const OPEN_PROBE: &[u8] = b"get imca:login-probe\r\n";

/// A `stats` listing longer than this is not a memcached's.
const MAX_STATS: usize = 1024;

/// A node may join the pool only if it answers `version` now.
pub async fn reachable(addr: &str) -> Result<(), Invalid> {
    memcached_version(addr, PROBE_TIMEOUT)
        .await
        .map(|_| ())
        .map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => Invalid::new("addr", format!("cache node {addr} is not usable: it {e}")),
            _ => Invalid::new("addr", format!("cache node {addr} is unreachable: {e}")),
        })
}

/// The limits a config over `nodes` must respect: `stripe_unit` (the
/// checking gateway's, if it should be enforced) and the smallest `-I`
/// among the nodes that answer `stats settings` (memcached's default when
/// none does).
pub async fn limits(stripe_unit: Option<u32>, nodes: &[String]) -> Limits {
    let settings = futures::future::join_all(nodes.iter().map(|n| memcached_settings(n, PROBE_TIMEOUT))).await;
    let item_limit = settings
        .iter()
        .filter_map(|r| r.as_ref().ok()?.get("item_size_max")?.parse::<u32>().ok())
        .min()
        .unwrap_or(DEFAULT_ITEM_LIMIT);
    Limits { stripe_unit, item_limit: Some(item_limit), ..Limits::UNKNOWN }
}

/// Connect, send `version`, expect `VERSION <v>`; returns `<v>`.
pub async fn memcached_version(addr: &str, deadline: Duration) -> io::Result<String> {
    let mut answer = None;
    exchange(addr, &Command::Version, deadline, |r| {
        answer = Some(match r {
            Response::Version(v) => Ok(String::from_utf8_lossy(v).into_owned()),
            other => Err(not_memcached(&other)),
        });
        true
    })
    .await?;
    answer.expect("exchange saw one response")
}

/// `stats`: the node's general statistics (curr_items, bytes,
/// limit_maxbytes, evictions, ...), as memcached and `imca cache-node` report them.
pub async fn memcached_stats(addr: &str, deadline: Duration) -> io::Result<HashMap<String, String>> {
    stats_of(addr, &[], deadline).await
}

/// `stats settings`: the node's configuration (item_size_max is `-I`).
pub async fn memcached_settings(addr: &str, deadline: Duration) -> io::Result<HashMap<String, String>> {
    stats_of(addr, &[b"settings"], deadline).await
}

async fn stats_of(addr: &str, args: &[&[u8]], deadline: Duration) -> io::Result<HashMap<String, String>> {
    let mut out = HashMap::new();
    let mut failed = None;
    exchange(addr, &Command::Stats { args: args.to_vec() }, deadline, |r| match r {
        Response::Stat { name, value } if out.len() < MAX_STATS => {
            out.insert(String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned());
            false
        }
        Response::Status(Status::End) => true,
        other => {
            failed = Some(not_memcached(&other));
            true
        }
    })
    .await?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// `flush_all`: drop every item of the node.
pub async fn memcached_flush_all(addr: &str, deadline: Duration) -> io::Result<()> {
    let mut answer = None;
    exchange(addr, &Command::FlushAll { delay: 0, noreply: false }, deadline, |r| {
        answer = Some(match r {
            Response::Status(Status::Ok) => Ok(()),
            other => Err(io::Error::other(format!("flush_all answered {other}"))),
        });
        true
    })
    .await?;
    answer.expect("exchange saw one response")
}

/// A connection to a node, TCP or UNIX.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// Send `cmd` on a new connection and hand each response to `take` until it
/// says the answer is complete, all within `deadline`.
async fn exchange(
    addr: &str,
    cmd: &Command<'_>,
    deadline: Duration,
    mut take: impl FnMut(Response<&[u8]>) -> bool,
) -> io::Result<()> {
    let attempt = async {
        // `unix:/path`: a node on this host listening on a UNIX socket
        let mut s: Box<dyn Stream> = match addr.strip_prefix("unix:") {
            Some(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
            None => Box::new(TcpStream::connect(addr).await?),
        };
        let mut req = LOGIN.get().cloned().unwrap_or_default();
        let mut login_pending = !req.is_empty();
        client::request(&mut req, cmd, &[]);
        let mut probe_pending = REFUSE_OPEN.load(std::sync::atomic::Ordering::Relaxed);
        s.write_all(if probe_pending { OPEN_PROBE } else { &req }).await?;
        let mut buf = Vec::with_capacity(4096);
        loop {
            match client::parse(&buf, 0) {
                Parsed::Done(r, used) if probe_pending => {
                    if r == Response::Status(Status::End) {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            "serves requests without a login, so anyone who reaches it can write the bank; start it \
                             with -Y and the file `imca secret cache-auth` writes (or pass --cache-allow-open-nodes)",
                        ));
                    }
                    probe_pending = false;
                    buf.drain(..used);
                    s.write_all(&req).await?;
                    continue;
                }
                Parsed::Done(r, used) if login_pending => {
                    if r != Response::Status(Status::Stored) {
                        return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("refused our credentials ({r})")));
                    }
                    login_pending = false;
                    buf.drain(..used);
                    continue;
                }
                Parsed::Done(r, used) => {
                    if take(r) {
                        return Ok(());
                    }
                    buf.drain(..used);
                    continue;
                }
                Parsed::Invalid(why) => {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, format!("not a memcached-compatible node ({why})")))
                }
                Parsed::Incomplete => {}
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before the answer ended")),
                n => buf.extend_from_slice(&chunk[..n]),
            }
        }
    };
    match tokio::time::timeout(deadline, attempt).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, format!("no answer within {deadline:?}"))),
    }
}

fn not_memcached(r: &Response<&[u8]>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a memcached-compatible node (answered {r})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every question against a real `imca cache-node` in this process.
    #[tokio::test]
    async fn a_real_node_answers_every_question() {
        let node = cache_node::start(cache_node::Config { threads: 1, ..cache_node::Config::local() }).await.unwrap();
        let addr = node.addr.to_string();
        assert!(!memcached_version(&addr, PROBE_TIMEOUT).await.unwrap().is_empty());
        reachable(&addr).await.unwrap();
        assert!(memcached_stats(&addr, PROBE_TIMEOUT).await.unwrap().contains_key("curr_items"));
        let settings = memcached_settings(&addr, PROBE_TIMEOUT).await.unwrap();
        let limit: u32 = settings["item_size_max"].parse().unwrap();
        assert_eq!(limits(None, &[addr.clone()]).await.item_limit, Some(limit));
        memcached_flush_all(&addr, PROBE_TIMEOUT).await.unwrap();
        node.shutdown().await;
    }

    /// A node with `-Y` answers every probe once the process has its login.
    #[tokio::test]
    async fn a_node_with_auth_is_probed_after_the_login() {
        let users = cache_node::auth::Users::parse("imca:pw\n").unwrap();
        let cfg = cache_node::Config { threads: 1, auth: Some(std::sync::Arc::new(users)), ..cache_node::Config::local() };
        let node = cache_node::start(cfg).await.unwrap();
        let addr = node.addr.to_string();
        set_login(b"set imca:auth 0 -1 7\r\nimca pw\r\n".to_vec());
        reachable(&addr).await.unwrap();
        assert!(memcached_stats(&addr, PROBE_TIMEOUT).await.unwrap().contains_key("curr_items"));
        memcached_flush_all(&addr, PROBE_TIMEOUT).await.unwrap();
        node.shutdown().await;
    }

    /// A "node" that streams one endless line is refused after MAX_LINE
    /// bytes, not buffered until the deadline.
    #[tokio::test]
    async fn an_endless_answer_is_refused_not_buffered() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let junk = vec![b'x'; 64 * 1024];
            while s.write_all(&junk).await.is_ok() {}
        });
        let e = memcached_version(&addr, Duration::from_secs(30)).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(reachable(&addr).await.is_err());
    }
}
