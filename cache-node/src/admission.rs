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

/// A warning, at most once per [`Watchful::EVERY`], when connections were
/// refused or closed before logging in since the last one: someone is
/// holding sockets open, and the operator should hear of it once, not per
/// socket.
#[derive(Default)]
pub struct Watchful {
    last: Option<std::time::Instant>,
    seen: [u64; 4],
}

impl Watchful {
    const EVERY: Duration = Duration::from_secs(10);

    pub fn check(&mut self, crowd: &daemon::Crowd) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.last.is_some_and(|t| t.elapsed() < Self::EVERY) {
            return;
        }
        let c = &crowd.counts;
        let now = [c.shed.load(Relaxed), c.reaped.load(Relaxed), c.refused_peer.load(Relaxed), c.refused_full.load(Relaxed)];
        let d: Vec<u64> = now.iter().zip(self.seen).map(|(n, s)| n - s).collect();
        if d.iter().any(|&n| n > 0) {
            let l = crowd.limits();
            tracing::warn!(shed = d[0], login_timeouts = d[1], refused_peer_cap = d[2], refused_conn_limit = d[3],
                not_logged_in_cap = l.max_unsettled, peer_cap = l.per_peer, conn_limit = l.max,
                "connections closed before logging in or refused since the last report (see stats: login_shed_connections, login_timeouts, rejected_connections)");
            self.seen = now;
            self.last = Some(std::time::Instant::now());
        }
    }
}
