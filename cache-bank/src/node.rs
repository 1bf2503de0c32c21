//! One node of the bank: its connection and its health.
//!
//! A node that fails is backed off (exponentially, up to a cap) and retried
//! later. We remember *why* it failed: a refused connection proves that no
//! process holds the node's memory any more (it died, or restarted empty),
//! which is the one case where a writer may skip the node without waiting.
//!
//! Over RDMA the node is reached through its RDMA listener on the same
//! ip:port as its TCP one. When that fails, its TCP listener tells why: a
//! refusal there means the process is gone (as over TCP); a node that
//! answers TCP but not RDMA (memcached, or a node started without
//! `--transport rdma`) is used over TCP, and the fallback is logged.
//!
//! With [`Credentials`], every new connection (either transport) first
//! logs in and is used only once the node said `STORED`; a node that
//! refuses is down for us like one that fails (never "refused", which
//! would claim its memory is gone), logged once until a login succeeds.
//!
//! Before the login, a new connection asks for a key without one
//! ([`PROBE`]). A node that answers it takes anyone's reads and writes: any
//! local user could save a value and write it back after the file changed
//! (its MAC stays valid), so such a node is not used unless the operator
//! allowed it (`--cache-allow-open-nodes`; the gauge
//! `imca_bank_node_open{node}` shows what each node did).

use crate::conn::Conn;
use crate::credentials::Credentials;
use crate::error::BankError;
use crate::reply::{Expect, Reply};
use cache_proto::response::{Response, Status};
use crate::metrics::BankMetrics;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpStream, UnixStream};

/// How `--cache-nodes` names a node on a UNIX socket: `unix:/run/imca/cn.sock`.
pub const UNIX_PREFIX: &str = "unix:";
use tokio::sync::Mutex;

pub const BACKOFF_MIN: Duration = Duration::from_millis(20);
pub const BACKOFF_MAX: Duration = Duration::from_millis(1000);
/// An RDMA connect is address + route resolution and a CM handshake,
/// several exchanges where TCP has one: give it at least this long.
const RDMA_CONNECT_MIN: Duration = Duration::from_millis(1000);
/// Asked before the login: a node that requires one answers `CLIENT_ERROR
/// unauthenticated` (and memcached keeps the connection for the login); an
/// open node answers `END`. A read, so the probe changes nothing.
const PROBE: &[u8] = b"get imca:login-probe\r\n";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownReason {
    /// nobody listens: the node's memory is gone
    Refused,
    /// slow, reset or misbehaving: it may still hold (old) data
    Failed,
}

struct State {
    conn: Option<Arc<Conn>>,
    down: Option<(Instant, DownReason)>,
    backoff: Duration,
}

pub struct Node {
    pub addr: String,
    /// connect over RDMA (falling back to TCP per connection, logged)
    rdma: bool,
    /// the bank's metrics (connections opened)
    metrics: BankMetrics,
    state: Mutex<State>,
    /// a request succeeded since the last (re)connect: the back-off resets
    proven: AtomicBool,
    /// log in with these on every new connection
    credentials: Option<Credentials>,
    /// the node's refusal of our login was logged (until one succeeds)
    refusal_logged: AtomicBool,
    /// use a node that serves requests without a login (`--cache-allow-open-nodes`)
    allow_open: bool,
    /// the node was found open and that was logged
    open_logged: AtomicBool,
}

impl Node {
    pub fn new(addr: String, rdma: bool, metrics: BankMetrics, credentials: Option<Credentials>, allow_open: bool) -> Node {
        Node {
            addr,
            rdma,
            metrics,
            state: Mutex::new(State { conn: None, down: None, backoff: BACKOFF_MIN }),
            proven: AtomicBool::new(false),
            credentials,
            refusal_logged: AtomicBool::new(false),
            allow_open,
            open_logged: AtomicBool::new(false),
        }
    }

    /// The live connection, connecting if needed. `ignore_backoff` lets a
    /// writer that must reach the node (or prove it gone) try again before
    /// its back-off ends.
    pub async fn conn(&self, connect_timeout: Duration, ignore_backoff: bool) -> Result<Arc<Conn>, BankError> {
        let mut st = self.state.lock().await;
        if let Some(c) = &st.conn {
            if c.is_alive() {
                return Ok(c.clone());
            }
            st.conn = None;
        }
        // A writer never trusts an old verdict: "refused" proves a node empty
        // only at the moment of the refusal (it may have restarted since and
        // been filled by others), so it always tries a fresh connection.
        if let Some((until, why)) = st.down {
            if Instant::now() < until && !ignore_backoff {
                return Err(match why {
                    DownReason::Refused => BankError::Refused(self.addr.clone()),
                    DownReason::Failed => BankError::Down(self.addr.clone()),
                });
            }
        }
        // a UNIX socket node is on this host: RDMA does not apply
        let connected = if self.rdma && !self.addr.starts_with(UNIX_PREFIX) { self.connect_rdma(connect_timeout).await } else { self.connect_tcp(connect_timeout).await };
        let connected = match connected {
            Ok(c) => match self.check_open(&c, connect_timeout).await {
                Ok(()) => self.login(c, connect_timeout).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match connected {
            Ok(c) => {
                self.metrics.connects.with_label_values(&[&self.addr, c.transport()]).inc();
                let c = Arc::new(c);
                st.conn = Some(c.clone());
                self.proven.store(false, Ordering::Relaxed);
                Ok(c)
            }
            Err((why, e)) => {
                Self::back_off(&mut st, why);
                Err(e)
            }
        }
    }

    /// TCP to `host:port`, or a UNIX stream socket for `unix:/path` (a node
    /// on this host started with `-s`; the same text protocol and tasks).
    async fn connect_tcp(&self, connect_timeout: Duration) -> Result<Conn, (DownReason, BankError)> {
        let connect = async {
            match self.addr.strip_prefix(UNIX_PREFIX) {
                Some(path) => Ok::<_, std::io::Error>(crate::tcp::TcpConn::start_unix(self.addr.clone(), UnixStream::connect(path).await?)),
                None => Ok(crate::tcp::TcpConn::start(self.addr.clone(), TcpStream::connect(&self.addr).await?)),
            }
        };
        match tokio::time::timeout(connect_timeout, connect).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => {
                // no socket file at a UNIX path is no node listening: "refused"
                let refused = matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::NotFound
                );
                Err(if refused {
                    (DownReason::Refused, BankError::Refused(self.addr.clone()))
                } else {
                    (DownReason::Failed, BankError::Io(self.addr.clone(), e.to_string()))
                })
            }
            Err(_) => Err((DownReason::Failed, BankError::Timeout(self.addr.clone(), connect_timeout))),
        }
    }

    /// Over RDMA when this build and the node allow it (the node's
    /// `--transport rdma` listener on the same ip:port), else TCP.
    async fn connect_rdma(&self, connect_timeout: Duration) -> Result<Conn, (DownReason, BankError)> {
        let t = connect_timeout.max(RDMA_CONNECT_MIN);
        // The bank times its requests itself; the transport's call timeout
        // (from the environment's defaults) only catches a connection that hangs.
        let why = match tokio::time::timeout(t, transport::select::connect_rdma(&self.addr, t)).await {
            Ok(Ok(c)) => {
                let login = self.credentials.as_ref().map(Credentials::login_command);
                return Ok(crate::rdma::RdmaConn::start(self.addr.clone(), c, login));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("RDMA connect timed out after {t:?}"),
        };
        let c = self.connect_tcp(connect_timeout).await?;
        tracing::warn!(node = %self.addr, "cache node not reachable over RDMA ({why}); using TCP for this connection");
        Ok(c)
    }

    /// Does the node serve requests without a login? Asked on every new
    /// connection (a node may restart without `-Y`). Over RDMA every message
    /// carries the login, so the question goes to the node's TCP listener.
    async fn check_open(&self, conn: &Conn, timeout: Duration) -> Result<(), (DownReason, BankError)> {
        let open = if conn.transport() == "rdma" {
            let tcp = self.connect_tcp(timeout).await?;
            self.answers_without_login(&tcp, timeout).await?
        } else {
            self.answers_without_login(conn, timeout).await?
        };
        self.metrics.open.with_label_values(&[&self.addr]).set(open as i64);
        if !open {
            return Ok(());
        }
        if self.allow_open {
            if !self.open_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(node = %self.addr,
                    "cache node serves requests without a login (--cache-allow-open-nodes): any local user can \
                     read the bank and write stale values back");
            }
            return Ok(());
        }
        if !self.open_logged.swap(true, Ordering::Relaxed) {
            tracing::error!(node = %self.addr,
                "cache node {} serves requests without a login: anyone who reaches it can write the bank; not using it \
                 (start it with -Y and the file `imca secret cache-auth` writes, or pass --cache-allow-open-nodes)",
                self.addr);
        }
        Err((DownReason::Failed, BankError::Server(self.addr.clone(), "serves requests without a login; not used".into())))
    }

    /// Send [`PROBE`] on a connection that has not logged in.
    async fn answers_without_login(&self, conn: &Conn, timeout: Duration) -> Result<bool, (DownReason, BankError)> {
        // One line either way: `END` (no such key) or the refusal. A value
        // (someone stored the probe's key) fails the connection: not used.
        let rx = conn.send(PROBE.to_vec(), vec![Expect::Line]);
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(r))) => match r.first() {
                Some(Reply::Line(Response::Status(Status::End))) => Ok(true),
                Some(r) if Self::unauthenticated(r).is_some() => Ok(false),
                other => Err((
                    DownReason::Failed,
                    BankError::Server(self.addr.clone(), format!("unexpected answer to a get: {other:?}")),
                )),
            },
            Ok(Ok(Err(e))) => Err((DownReason::Failed, e)),
            Ok(Err(_)) => Err((DownReason::Failed, BankError::Io(self.addr.clone(), "connection closed".into()))),
            Err(_) => Err((DownReason::Failed, BankError::Timeout(self.addr.clone(), timeout))),
        }
    }

    /// Log in on a fresh connection, when we have credentials: the login
    /// goes first, alone (memcached 1.6 drops replies to commands pipelined
    /// behind a failed login), and must be answered `STORED` in time.
    async fn login(&self, conn: Conn, timeout: Duration) -> Result<Conn, (DownReason, BankError)> {
        let Some(cred) = &self.credentials else { return Ok(conn) };
        let rx = conn.send(cred.login_command(), vec![Expect::Line]);
        let reply = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(mut r))) => r.pop(),
            Ok(Ok(Err(e))) => return Err((DownReason::Failed, e)),
            Ok(Err(_)) => return Err((DownReason::Failed, BankError::Io(self.addr.clone(), "connection closed".into()))),
            Err(_) => return Err((DownReason::Failed, BankError::Timeout(self.addr.clone(), timeout))),
        };
        if matches!(reply, Some(Reply::Line(Response::Status(Status::Stored)))) {
            if self.refusal_logged.swap(false, Ordering::Relaxed) {
                tracing::info!(node = %self.addr, user = %cred.user, "cache node accepts our credentials again");
            }
            return Ok(conn);
        }
        let said = reply.map_or_else(|| "nothing".to_string(), |r| r.to_string());
        if !self.refusal_logged.swap(true, Ordering::Relaxed) {
            tracing::error!(
                node = %self.addr, user = %cred.user, reply = %said,
                "cache node {} refused our credentials (--cache-auth-file must match a line of the node's -Y file); not using it",
                self.addr
            );
        }
        Err((DownReason::Failed, BankError::Server(self.addr.clone(), format!("refused our credentials: {said}"))))
    }

    /// The text of a reply that says the node wants a login first
    /// (memcached `-Y`, and we have no credentials for it).
    pub fn unauthenticated(r: &Reply) -> Option<String> {
        match r {
            Reply::Line(Response::ClientError(why)) if &why[..] == b"unauthenticated" => {
                Some("CLIENT_ERROR unauthenticated".into())
            }
            _ => None,
        }
    }

    /// A node answered `said` where we expected data: if that is memcached's
    /// "log in first", say so once (until a login succeeds).
    pub fn note_refusal(&self, said: &str) {
        if said.contains("unauthenticated") && !self.refusal_logged.swap(true, Ordering::Relaxed) {
            tracing::error!(
                node = %self.addr, reply = %said,
                "cache node {} refused our requests: it requires a login (memcached -Y); give this daemon \
                 --cache-auth-file with one of the node's user:password lines; not using it",
                self.addr
            );
        }
    }

    fn back_off(st: &mut State, why: DownReason) {
        st.down = Some((Instant::now() + st.backoff, why));
        st.backoff = (st.backoff * 2).min(BACKOFF_MAX);
    }

    /// `conn` failed (timeout, reset, garbage): drop it (a reset, so a frozen
    /// node never applies what it had not read yet) and back the node off.
    pub async fn fail(&self, conn: &Arc<Conn>) {
        let mut st = self.state.lock().await;
        if st.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            st.conn = None;
            Self::back_off(&mut st, DownReason::Failed);
        }
    }

    /// Forget the connection without backing off (a writer's retry).
    pub async fn drop_conn(&self, conn: &Arc<Conn>) {
        let mut st = self.state.lock().await;
        if st.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            st.conn = None;
        }
    }

    /// A request succeeded: the node is healthy again.
    pub async fn succeeded(&self) {
        if !self.proven.swap(true, Ordering::Relaxed) {
            let mut st = self.state.lock().await;
            st.backoff = BACKOFF_MIN;
            st.down = None;
        }
    }

    /// For status pages: is the node currently backed off?
    pub async fn is_down(&self) -> bool {
        let st = self.state.lock().await;
        st.down.is_some_and(|(until, _)| Instant::now() < until)
    }
}
