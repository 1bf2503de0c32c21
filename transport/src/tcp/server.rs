//! The server end: the accept loop, the hello, and the slots.
//!
//! ```text
//!  accept ─> handshake slot (max_handshakes, oldest dropped when full; deadline handshake_timeout)
//!              │ client hello ok
//!              ├─ connection slot free ─────────────────────────────> hello ok ─> conn::serve
//!              ├─ all taken: close the longest-quiet idle connection ─> hello ok ─> conn::serve
//!              └─ all taken and busy ───────────────────────────────> status "busy", closed
//! ```
//!
//! Sockets that have not finished the hello never hold a connection slot,
//! so a crowd of silent or half-hello sockets cannot lock gateways out: at
//! most `max_handshakes` of them exist, each for at most the deadline, and a
//! newcomer pushes out the oldest. Established connections are swept every
//! quarter idle timeout ([`sweep`]): closed when idle, or when a frame or a
//! reply has stopped moving (the peer stopped sending mid-frame, or stopped
//! reading its replies) — which also gives back the memory they held.

use super::activity::Activity;
use super::budget::Pool;
use super::conn::{self, Established};
use super::frame::{Hello, STATUS_BUSY, STATUS_OK, STATUS_TLS_REQUIRED};
use super::tls::Stream;
use super::handshake;
use super::stats::{Close, ServerStats};
use super::*;
use crate::log_gate::LogGate;
use crate::RpcService;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

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

/// How long a newcomer waits for a slot when all are taken: for the one of
/// the connection it evicted, or for one to become evictable or free.
const SLOT_WAIT: Duration = Duration::from_secs(2);

/// What every task of one server shares.
pub(super) struct Shared {
    pub opts: ServerOptions,
    pub svc: Arc<dyn RpcService>,
    pub pool: Arc<Pool>,
    slots: Arc<Semaphore>,
    conns: Mutex<HashMap<u64, Arc<Activity>>>,
    next_conn: AtomicU64,
}

impl Shared {
    pub fn stats(&self) -> &ServerStats {
        &self.opts.stats
    }

    /// List an established connection (for the sweeper and eviction) until
    /// the guard drops.
    pub fn register(self: &Arc<Self>, act: Arc<Activity>) -> Registered {
        let id = self.next_conn.fetch_add(1, Relaxed);
        self.conns.lock().unwrap().insert(id, act);
        self.stats().connections.fetch_add(1, Relaxed);
        Registered(self.clone(), id)
    }

    /// A connection slot: a free one, or the one of the longest-quiet idle
    /// connection, which is closed for it (trying again while connections
    /// age into evictability), or one that frees up meanwhile. `None`
    /// after [`SLOT_WAIT`]: every slot is busy.
    async fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        let deadline = Instant::now() + SLOT_WAIT;
        loop {
            if let Ok(p) = self.slots.clone().try_acquire_owned() {
                return Some(p);
            }
            self.evict_one();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let wait = left.min(self.opts.evict_after / 2).max(Duration::from_millis(10));
            if let Ok(p) = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
                return Some(p.expect("slots are never closed"));
            }
        }
    }

    fn evict_one(&self) -> Option<()> {
        // (one victim per newcomer and round: `close` is first-wins, and a
        // victim already closing is not picked again)
        let now = Instant::now();
        let conns = self.conns.lock().unwrap();
        let quiet = |a: &Arc<Activity>| a.quiet(now);
        let victim = conns
            .values()
            .filter(|a| a.closing().is_none() && a.is_idle() && quiet(a) >= self.opts.evict_after)
            .max_by_key(|a| quiet(a))?;
        victim.close(Close::Evicted).then_some(())
    }
}

pub(super) struct Registered(Arc<Shared>, u64);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.conns.lock().unwrap().remove(&self.1);
        self.0.stats().connections.fetch_sub(1, Relaxed);
    }
}

/// Serve `service` on `listener` until `shutdown` completes; then stop
/// accepting, stop reading new requests, and let in-flight ones finish.
pub async fn serve(
    listener: TcpListener,
    service: Arc<dyn RpcService>,
    opts: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared {
        pool: Pool::new(opts.memory, opts.stats.clone()),
        slots: Arc::new(Semaphore::new(opts.max_connections.max(1))),
        conns: Mutex::default(),
        next_conn: AtomicU64::new(0),
        svc: service,
        opts,
    });
    let sweeper = shared.opts.idle_timeout.map(|t| tokio::spawn(sweep(shared.clone(), t)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut handshakes = JoinSet::new();
    let mut oldest_first: VecDeque<AbortHandle> = VecDeque::new();
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    if !crate::allow::allows(&shared.opts.allow, peer.ip()) {
                        shared.stats().count(Close::NotAllowed);
                        static NOT_ALLOWED: LogGate = LogGate::new(Duration::from_secs(1));
                        if let Some(held) = NOT_ALLOWED.pass() {
                            tracing::warn!(%peer, held, "storage RPC connection refused: the address is not in --auth-allow");
                        }
                        continue; // dropped: closed without a word
                    }
                    oldest_first.retain(|h| !h.is_finished());
                    if oldest_first.len() >= shared.opts.max_handshakes.max(1) {
                        if let Some(h) = oldest_first.pop_front() {
                            h.abort();
                            shared.stats().count(Close::HandshakeEvicted);
                        }
                    }
                    oldest_first.push_back(handshakes.spawn(handshake(stream, peer, shared.clone())));
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = handshakes.join_next() => {
                if let Ok(Some(est)) = done {
                    conns.spawn(conn::serve(est, shared.clone(), stop_rx.clone()));
                }
            }
        }
        // Reap finished connections so the set does not grow without bound.
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    handshakes.shutdown().await;
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    if let Some(s) = sweeper {
        s.abort();
    }
    Ok(())
}

/// Hello within the deadline, or the socket is closed. Holds a handshake
/// slot (counted in `handshakes`) until it returns or is aborted.
async fn handshake(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) -> Option<Established> {
    let stats = &shared.opts.stats;
    stats.handshakes.fetch_add(1, Relaxed);
    struct Leave<'a>(&'a ServerStats);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.handshakes.fetch_sub(1, Relaxed);
        }
    }
    let _leave = Leave(stats);
    let opened = async {
        let mut stream = open(stream, &shared).await?;
        let (hello, slot) = hello(&mut stream, &shared).await?;
        Ok((stream, hello, slot))
    };
    match tokio::time::timeout(shared.opts.handshake_timeout, opened).await {
        Ok(Ok((stream, hello, slot))) => Some(Established { stream, peer, hello, slot }),
        Ok(Err((why, detail))) => {
            stats.count(why);
            // Anyone who can connect can make these: log at a bounded rate.
            static REFUSED: LogGate = LogGate::new(Duration::from_secs(1));
            match why {
                Close::Peer => tracing::debug!(%peer, "storage RPC handshake: {detail}"),
                _ => {
                    if let Some(held) = REFUSED.pass() {
                        let more = if held > 0 { format!(" ({held} more since the last line)") } else { String::new() };
                        tracing::warn!(%peer, "storage RPC handshake refused: {detail}{more}");
                    }
                }
            }
            None
        }
        Err(_) => {
            stats.count(Close::HandshakeTimeout);
            tracing::debug!(%peer, "storage RPC handshake timed out");
            None
        }
    }
}

/// The byte stream the hello runs on: TLS first when the server has it.
async fn open(mut s: TcpStream, shared: &Shared) -> Result<Stream, (Close, String)> {
    let _ = s.set_nodelay(true);
    let Some(tls) = &shared.opts.tls else { return Ok(Stream::Plain(s)) };
    // A plain hello on a TLS port: say so in plain text, so the client's
    // error names the cause instead of a broken TLS record.
    let mut first = [0u8; 4];
    if matches!(s.peek(&mut first).await, Ok(4)) && first == MAGIC {
        refuse(&mut s, STATUS_TLS_REQUIRED).await;
        return Err((Close::HandshakeRefused, "a plain-text client on a TLS server (give it --tls-ca)".into()));
    }
    tls.accept(s).await.map_err(|e| (Close::HandshakeRefused, format!("TLS handshake: {e}")))
}

async fn hello(s: &mut Stream, shared: &Shared) -> Result<(Hello, OwnedSemaphorePermit), (Close, String)> {
    let o = &shared.opts;
    let theirs = match handshake::server(s, o.max_frame, o.idle_timeout, o.auth.as_ref()).await {
        Ok(Ok(h)) => h,
        Ok(Err(r)) => {
            if let Some(status) = r.status {
                refuse(s, status).await;
            }
            return Err((if r.auth { Close::AuthFailed } else { Close::HandshakeRefused }, r.why));
        }
        Err(e) => return Err((Close::Peer, format!("closed during the hello: {e}"))),
    };
    let Some(slot) = shared.take_slot().await else {
        refuse(s, STATUS_BUSY).await;
        let n = shared.opts.max_connections;
        return Err((Close::Busy, format!("all {n} connection slots are busy (imca storage --max-connections)")));
    };
    s.write_all(&Hello::verdict(STATUS_OK)).await.map_err(|e| (Close::Peer, format!("writing the verdict: {e}")))?;
    Ok((theirs, slot))
}

/// Say no in a way every version reads: the refusal, then our end closed,
/// and what the client already sent read (closing on unread bytes would
/// reset the connection, and the client might lose the refusal).
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, status: u16) {
    let _ = s.write_all(&Hello::refusal(status).wire()).await;
    let _ = s.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_millis(200), s.read(&mut sink)).await;
}

/// Close what is idle or stalled, every quarter of the idle timeout.
async fn sweep(shared: Arc<Shared>, idle: Duration) {
    let mut tick = tokio::time::interval((idle / 4).clamp(Duration::from_millis(5), Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        for a in shared.conns.lock().unwrap().values() {
            if let Some(why) = verdict(a, now, idle) {
                a.close(why);
            }
        }
    }
}

/// Whether one connection should close now, and why.
fn verdict(a: &Activity, now: Instant, idle: Duration) -> Option<Close> {
    if a.closing().is_some() {
        return None;
    }
    if a.unsent.load(Relaxed) > 0 {
        // replies wait for the peer to read them
        return (a.quiet_tx(now) >= idle).then_some(Close::Stalled);
    }
    if a.in_flight.load(Relaxed) > 0 || a.waiting.load(Relaxed) {
        return None; // the service, or our budget, is what it waits for
    }
    if a.quiet(now) < idle {
        return None;
    }
    Some(if a.partial.load(Relaxed) { Close::Stalled } else { Close::Idle })
}
