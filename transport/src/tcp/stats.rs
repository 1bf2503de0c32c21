//! What a TCP server counts: connections by state, closes by reason, bytes
//! held. Plain atomics, read by whoever embeds the server (the storage
//! server copies them into its Prometheus registry at scrape time).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Why a socket was closed or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// the client closed it
    Peer,
    /// nothing in flight and nothing received for the idle timeout
    Idle,
    /// a frame stopped arriving, or replies stopped being read, for the idle timeout
    Stalled,
    /// quiet, and every slot was taken when a new client arrived
    Evicted,
    /// a malformed or oversized frame
    Invalid,
    /// a read error on the socket
    ReadError,
    /// a reply larger than the client accepts (it asked for more than it can take)
    Oversized,
    /// the server is shutting down
    Shutdown,
    /// the hello did not arrive within the handshake deadline
    HandshakeTimeout,
    /// not an IMCa peer, or another protocol version
    HandshakeRefused,
    /// dropped unfinished when the handshake slots were full
    HandshakeEvicted,
    /// refused at the hello: every connection slot busy
    Busy,
    /// refused at the hello: no credentials, or a proof that did not verify
    AuthFailed,
    /// from an address outside the allow-list (`--auth-allow`)
    NotAllowed,
}

impl Close {
    pub const ALL: [Close; 14] = [
        Close::Peer,
        Close::Idle,
        Close::Stalled,
        Close::Evicted,
        Close::Invalid,
        Close::ReadError,
        Close::Oversized,
        Close::Shutdown,
        Close::HandshakeTimeout,
        Close::HandshakeRefused,
        Close::HandshakeEvicted,
        Close::Busy,
        Close::AuthFailed,
        Close::NotAllowed,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Close::Peer => "peer",
            Close::Idle => "idle",
            Close::Stalled => "stalled",
            Close::Evicted => "evicted",
            Close::Invalid => "invalid",
            Close::ReadError => "read_error",
            Close::Oversized => "oversized",
            Close::Shutdown => "shutdown",
            Close::HandshakeTimeout => "handshake_timeout",
            Close::HandshakeRefused => "handshake_refused",
            Close::HandshakeEvicted => "handshake_evicted",
            Close::Busy => "busy",
            Close::AuthFailed => "auth_failed",
            Close::NotAllowed => "not_allowed",
        }
    }

    fn index(self) -> usize {
        Close::ALL.iter().position(|c| *c == self).expect("listed")
    }
}

/// Counters of one server (all its connections). Share it through
/// [`ServerOptions::stats`](super::ServerOptions::stats) and read it any time.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub(super) connections: AtomicUsize,
    pub(super) handshakes: AtomicUsize,
    pub(super) buffered: AtomicUsize,
    pub(super) peak_buffered: AtomicUsize,
    pub(super) overdraft: AtomicU64,
    closed: [AtomicU64; Close::ALL.len()],
}

impl ServerStats {
    /// Established connections now.
    pub fn connections(&self) -> usize {
        self.connections.load(Relaxed)
    }

    /// Sockets working on their hello now.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Relaxed)
    }

    /// Bytes held for clients now (request frames being received or
    /// served, replies not yet written), as reserved from the budgets.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered.load(Relaxed)
    }

    /// The most [`buffered_bytes`](Self::buffered_bytes) ever was.
    pub fn peak_buffered_bytes(&self) -> usize {
        self.peak_buffered.load(Relaxed)
    }

    /// Reply bytes beyond what the service predicted that found no budget
    /// left (they are sent anyway: the memory is already in use).
    pub fn overdraft_bytes(&self) -> u64 {
        self.overdraft.load(Relaxed)
    }

    /// Sockets closed or refused for `why`, since the server started.
    pub fn closed(&self, why: Close) -> u64 {
        self.closed[why.index()].load(Relaxed)
    }

    pub(super) fn count(&self, why: Close) {
        self.closed[why.index()].fetch_add(1, Relaxed);
    }

    pub(super) fn add_buffered(&self, n: usize) {
        let now = self.buffered.fetch_add(n, Relaxed) + n;
        self.peak_buffered.fetch_max(now, Relaxed);
    }

    pub(super) fn sub_buffered(&self, n: usize) {
        self.buffered.fetch_sub(n, Relaxed);
    }
}
