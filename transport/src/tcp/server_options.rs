//! What a server is told: its limits (connections, handshakes, frames,
//! memory), timeouts, key, TLS and allowed networks. `serve` takes it; every
//! task of the server reads it through `Shared`.

use super::stats::ServerStats;
use super::*;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Established connections served at once. Sockets still on their
    /// hello do not count (see `max_handshakes`).
    pub max_connections: usize,
    /// Sockets working on their hello at once; when full, the oldest is
    /// closed to make room.
    pub max_handshakes: usize,
    /// Largest request frame (head + bulk) accepted, announced in the
    /// hello; a bigger one drops the connection.
    pub max_frame: usize,
    /// Requests of one connection received and not yet answered (the
    /// reply written) at once.
    pub max_in_flight: usize,
    /// A socket that does not complete the hello within this is closed.
    pub handshake_timeout: Duration,
    /// A connection with nothing in flight that sends nothing for this long
    /// is closed, and so is one whose frame or replies stop moving for this
    /// long. `None`: never (and no stall detection either).
    pub idle_timeout: Option<Duration>,
    /// When every connection slot is taken, a connection with nothing in
    /// flight that has been quiet at least this long may be closed to let a
    /// new client in.
    pub evict_after: Duration,
    /// Bytes one connection may hold: request frames being received or
    /// served, replies not yet written.
    pub conn_memory: usize,
    /// Bytes all connections may hold together.
    pub memory: usize,
    /// Counters; keep a clone to read them.
    pub stats: Arc<ServerStats>,
    /// The volume's handshake key: clients must prove they hold it before
    /// any operation (`crate::auth`). `None` serves anyone (`--insecure`).
    pub auth: Option<secret::Key>,
    /// TLS under the hello (`tls.rs`); `None`: plain TCP.
    pub tls: Option<super::tls::ServerTls>,
    /// Client networks allowed to connect (GlusterFS `auth.allow`); a
    /// connection from elsewhere is closed at once. Empty: any.
    pub allow: Vec<super::Cidr>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_frame: DEFAULT_MAX_FRAME,
            max_in_flight: 256,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            evict_after: Duration::from_secs(1),
            conn_memory: DEFAULT_CONN_MEMORY,
            memory: DEFAULT_SERVER_MEMORY,
            stats: Arc::default(),
            auth: None,
            tls: None,
            allow: Vec::new(),
        }
    }
}
