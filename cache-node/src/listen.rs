//! Where the node listens: TCP (`-l`, `-p`) or, with `-s FILE`, a UNIX
//! stream socket instead (memcached: `-s` disables network support). Both
//! feed the same acceptor and workers (`server.rs`), so the text, meta and
//! binary protocols, `-c` and `-B` apply alike.
//!
//! The socket file, as memcached makes it: its permission bits are `-a`'s
//! mask (`& 0777`), set through the umask around `bind` so that no one can
//! connect in a window before a `chmod`. A socket file already at the path
//! is replaced when nothing answers on it (a node that died leaves one:
//! neither memcached nor this node removes it on exit); one that a live
//! node answers on is *not* taken over — memcached unlinks it and leaves the
//! live node unreachable, which with several nodes per host would silently
//! split the bank, so this refuses like a TCP port in use. A path that is
//! not a socket is never removed.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

use crate::config::Config;
use crate::exit::OsErr;

/// A bound listener of either kind.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// An accepted connection, still a std socket (non-blocking) so it can be
/// handed to the worker thread whose runtime will own it.
pub enum Accepted {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Listener {
    /// Binds what `config` asks for, with memcached's messages on failure
    /// (and its exit status 71, through [`OsErr`]).
    pub async fn bind(config: &Config) -> anyhow::Result<Listener> {
        match &config.unix_socket {
            Some(path) => Ok(Listener::Unix(bind_unix(path, config.unix_mask)?, path.clone())),
            None => match bind_tcp(&config.listen).await {
                Ok(l) => Ok(Listener::Tcp(l)),
                // memcached's words (it was given -l; without, it names the port)
                Err(e) => {
                    let host = config.listen.rsplit_once(':').map_or(config.listen.as_str(), |(h, _)| h);
                    Err(OsErr(format!("failed to listen on one of interface(s) {host}: {e}")).into())
                }
            },
        }
    }

    pub async fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => Ok(Accepted::Tcp(l.accept().await?.0.into_std()?)),
            Listener::Unix(l, _) => Ok(Accepted::Unix(l.accept().await?.0.into_std()?)),
        }
    }

    /// memcached's `stats conns` name for the listener (`tcp:ip:port`, `unix:path`).
    pub fn name(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().map_or_else(|_| "tcp:?".into(), |a| format!("tcp:{a}")),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }

    pub fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        }
    }
}

/// memcached's default listen backlog (`-b`). The OS's usual 128 fills
/// within a millisecond of a connection flood, and a real client's SYN is
/// then dropped and retried a second later; 1024 absorbs a flood while the
/// acceptor sheds it (`admission.rs`).
const BACKLOG: u32 = 1024;

async fn bind_tcp(listen: &str) -> io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(listen).await? {
        let s = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        s.set_reuseaddr(true)?;
        if let Err(e) = s.bind(addr) {
            last = Some(e);
            continue;
        }
        match s.listen(BACKLOG) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{listen}: no address to listen on"))))
}

fn bind_unix(path: &Path, mask: u32) -> Result<UnixListener, OsErr> {
    let fail = |why: String| OsErr(format!("failed to listen on UNIX socket: {}: {why}", path.display()));
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.file_type().is_socket() {
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => return Err(fail("Address already in use (a live node answers on it)".into())),
                // nothing listens: a dead node's file, replaced as memcached does
                Err(_) => {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
    // SAFETY: umask only swaps the process mask; this runs at start-up,
    // before the worker threads exist, and is restored right after bind.
    let old = unsafe { libc::umask(!(mask & 0o777) & 0o777) };
    let bound = std::os::unix::net::UnixListener::bind(path);
    unsafe { libc::umask(old) };
    let l = bound.map_err(|e| fail(e.to_string()))?;
    l.set_nonblocking(true).map_err(|e| fail(e.to_string()))?;
    UnixListener::from_std(l).map_err(|e| fail(e.to_string()))
}
