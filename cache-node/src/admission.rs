//! Who may hold one of the node's connections, and for how long without
//! logging in: the acceptor (`server.rs`) admits every connection through
//! the node's `daemon::Crowd` before handing it to a worker.
//!
//! ```text
//!  accept ─> peer (local uid: sock_diag / SO_PEERCRED; remote: IP) ─> crowd.admit
//!     ├─ refused (-c, or the peer's cap, all logged in) ─> "ERROR Too many open connections", rejected_connections
//!     └─ admitted ─> worker; without -Y settled at once (memcached's -c, nothing is shed)
//!                    with -Y unsettled until its login succeeds (session.rs):
//!                      shed when unsettled ones are at --login-conn-limit (oldest of the peer holding most)
//!                      closed past --login-timeout (the acceptor's reaper)
//! ```
//!
//! Without this, 1,024 idle sockets from any local user filled `-c` and
//! every gateway started after them ran without the bank. With `-Y` the
//! volume's own clients log in with their first bytes, so whatever has not
//! logged in is what goes when room is needed; without `-Y` nobody can be
//! told apart and memcached's `-c` (plus `--peer-conn-limit` if given)
//! applies unchanged.

use std::os::fd::AsFd;
use std::time::Duration;

use daemon::Peer;

use crate::listen::Accepted;

/// Who is at the other end of `s`; a peer the kernel will not name counts
/// as one "unknown" peer (uid `u32::MAX`, never a real one).
pub fn peer_of(s: &Accepted) -> Peer {
    let unknown = Peer::Uid(u32::MAX);
    match s {
        Accepted::Tcp(t) => match (t.local_addr(), t.peer_addr()) {
            (Ok(local), Ok(peer)) => daemon::peer::identify(local, peer),
            _ => unknown,
        },
        Accepted::Unix(u) => daemon::peer::unix_peer(u.as_fd()).unwrap_or(unknown),
    }
}

/// How often the acceptor closes connections past the login timeout: a
/// fraction of it, so none outlives it by much.
pub fn reap_every(login_timeout: Duration) -> Duration {
    (login_timeout / 8).clamp(Duration::from_millis(50), Duration::from_secs(1))
}
