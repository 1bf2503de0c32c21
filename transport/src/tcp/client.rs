//! The client end: one multiplexed connection, reconnected on demand.

use super::direct_out::DirectOut;
use super::frame::{self, Hello, ReadEnd, HEADER_LEN};
use super::DEFAULT_MAX_FRAME;
use crate::{Message, RpcClient, TransportError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use super::tls::Stream;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

#[derive(Clone, Debug)]
pub struct TcpClientOptions {
    /// A call (incl. connecting, when needed) that takes longer fails with
    /// `TransportError::Timeout`.
    pub call_timeout: Duration,
    /// Bound on connect + handshake alone.
    pub connect_timeout: Duration,
    /// Largest reply frame accepted (announced in the hello); a bigger one
    /// drops the connection.
    pub max_frame: usize,
    /// Calls queued for the writer before `call` waits (back-pressure; on
    /// plain TCP, `queue_depth` × 8 KiB of frames the socket has not taken).
    pub queue_depth: usize,
    /// After a connect attempt timed out (peer blackholed), calls fail at
    /// once for this long. A refused connection (peer down) never waits.
    pub reconnect_backoff: Duration,
    /// The volume's handshake key: the server must prove it holds it, and
    /// we prove it in turn. `None` only talks to `--insecure` servers.
    pub auth: Option<secret::Key>,
    /// TLS under the hello (`tls.rs`); `None`: plain TCP.
    pub tls: Option<super::tls::ClientTls>,
}

impl Default for TcpClientOptions {
    fn default() -> Self {
        TcpClientOptions {
            call_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_frame: DEFAULT_MAX_FRAME,
            queue_depth: 1024,
            reconnect_backoff: Duration::from_secs(1),
            auth: None,
            tls: None,
        }
    }
}

type Waiter = oneshot::Sender<Result<Message, TransportError>>;

/// Calls waiting for their replies; `None` once the connection died, so a
/// call that registers late fails at once instead of waiting for its timeout.
struct Pending(Mutex<Option<HashMap<u64, Waiter>>>);

impl Pending {
    fn insert(&self, id: u64, w: Waiter) -> bool {
        match self.0.lock().unwrap().as_mut() {
            Some(map) => {
                map.insert(id, w);
                true
            }
            None => false,
        }
    }

    fn is_empty(&self) -> bool {
        self.0.lock().unwrap().as_ref().is_none_or(|m| m.is_empty())
    }

    fn take(&self, id: u64) -> Option<Waiter> {
        self.0.lock().unwrap().as_mut().and_then(|m| m.remove(&id))
    }

    /// Mark the connection dead and fail every waiting call.
    fn fail_all(&self, why: &str) {
        let waiters = self.0.lock().unwrap().take();
        for (_, w) in waiters.into_iter().flatten() {
            let _ = w.send(Err(TransportError::Disconnected(why.to_string())));
        }
    }
}

/// How a call's frame leaves.
enum Out {
    /// written by the call itself (plain TCP; see `direct_out`)
    Direct(Arc<DirectOut>),
    /// queued for the writer task (TLS)
    Task(mpsc::Sender<(u64, Message, ())>),
}

struct Conn {
    out: Out,
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
    /// frames received so far (to tell a silent peer from a slow call)
    rx_frames: Arc<AtomicU64>,
    /// the largest request frame the server accepts (its hello)
    peer_max_frame: usize,
    /// stop using the connection once it has been quiet this long: half the
    /// server's idle timeout, so a call never races the server's close
    retire_after: Option<Duration>,
    born: tokio::time::Instant,
    /// ms after `born` of the last call sent or frame received
    last_used: Arc<AtomicU64>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Conn {
    fn touch(&self) {
        self.last_used.store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Quiet for longer than the server lets it be, with no call waiting.
    fn retired(&self) -> bool {
        let Some(after) = self.retire_after else { return false };
        let used = Duration::from_millis(self.last_used.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(used) >= after && self.pending.is_empty()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
        self.pending.fail_all("client dropped");
    }
}

/// A TCP [`RpcClient`]. Cheap to share (`Arc`); all calls share one
/// connection, which is (re)opened by the first call that needs it.
pub struct TcpClient {
    addr: String,
    opts: TcpClientOptions,
    slot: tokio::sync::Mutex<Slot>,
    next_id: AtomicU64,
}

#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    /// set while the peer is unreachable, so we log transitions, not every call
    down: bool,
    /// after a connect *timeout* (a blackholed peer), calls fail at once
    /// until then instead of each waiting out its own connect timeout
    unreachable_until: Option<tokio::time::Instant>,
}

impl TcpClient {
    /// A client that connects on its first call.
    pub fn new(addr: impl Into<String>, opts: TcpClientOptions) -> TcpClient {
        TcpClient { addr: addr.into(), opts, slot: Default::default(), next_id: AtomicU64::new(1) }
    }

    /// A client whose connection (and handshake) is established now.
    pub async fn connect(addr: impl Into<String>, opts: TcpClientOptions) -> Result<TcpClient, TransportError> {
        let c = TcpClient::new(addr, opts);
        c.connection().await?;
        Ok(c)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The live connection, opening a new one if there is none or it died.
    async fn connection(&self) -> Result<Arc<Conn>, TransportError> {
        let mut slot = self.slot.lock().await;
        if let Some(c) = slot.conn.as_ref() {
            if !c.dead.load(Ordering::Acquire) && !c.retired() {
                return Ok(c.clone());
            }
            if c.retired() {
                tracing::debug!(peer = %self.addr, "storage RPC connection quiet for half the server's idle timeout; opening a fresh one");
            }
        }
        slot.conn = None;
        if let Some(until) = slot.unreachable_until {
            if tokio::time::Instant::now() < until {
                return Err(TransportError::Connect(format!("{}: unreachable (recent connect timed out)", self.addr)));
            }
        }
        match self.open().await {
            Ok(c) => {
                if std::mem::take(&mut slot.down) {
                    tracing::info!(peer = %self.addr, "storage RPC connection re-established");
                }
                slot.unreachable_until = None;
                let c = Arc::new(c);
                slot.conn = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                if !std::mem::replace(&mut slot.down, true) {
                    tracing::warn!(peer = %self.addr, "storage RPC peer unavailable: {e}");
                }
                if matches!(&e, TransportError::Connect(m) if m.contains("timed out")) {
                    slot.unreachable_until = Some(tokio::time::Instant::now() + self.opts.reconnect_backoff);
                }
                Err(e)
            }
        }
    }

    async fn open(&self) -> Result<Conn, TransportError> {
        let t = self.opts.connect_timeout;
        let (stream, theirs) = tokio::time::timeout(t, handshake(&self.addr, &self.opts))
            .await
            .map_err(|_| TransportError::Connect(format!("{}: connect/handshake timed out after {t:?}", self.addr)))??;
        let pending = Arc::new(Pending(Mutex::new(Some(HashMap::new()))));
        let dead = Arc::new(AtomicBool::new(false));
        let rx_frames = Arc::new(AtomicU64::new(0));
        let born = tokio::time::Instant::now();
        let last_used = Arc::new(AtomicU64::new(0));

        let (p, d, peer) = (pending.clone(), dead.clone(), self.addr.clone());
        let broken = move |e: std::io::Error| {
            d.store(true, Ordering::Release);
            tracing::warn!(%peer, "storage RPC write failed: {e}");
            p.fail_all(&format!("write failed: {e}"));
        };
        let (rd, out, writer): (super::tls::ReadHalf, _, _) = match stream {
            Stream::Plain(s) => {
                let (rd, wr) = s.into_split();
                let direct = Arc::new(DirectOut::new(wr, self.opts.queue_depth.saturating_mul(8 << 10)));
                let d = direct.clone();
                let writer = tokio::spawn(async move { broken(d.flush_forever().await) });
                (Box::new(rd), Out::Direct(direct), writer)
            }
            tls => {
                let (rd, wr) = tls.into_split();
                let (tx, rx) = mpsc::channel(self.opts.queue_depth);
                let writer = tokio::spawn(async move {
                    if let Err(e) = frame::write_frames(wr, rx).await {
                        broken(e)
                    }
                });
                (rd, Out::Task(tx), writer)
            }
        };

        let (p, d, peer, max) = (pending.clone(), dead.clone(), self.addr.clone(), self.opts.max_frame);
        let (lr, lu) = (rx_frames.clone(), last_used.clone());
        let reader = tokio::spawn(async move {
            let mut frames = frame::FrameReader::new(rd, max);
            let end = loop {
                match frames.next().await {
                    Ok((id, msg, _)) => {
                        lr.fetch_add(1, Ordering::Relaxed);
                        lu.store(born.elapsed().as_millis() as u64, Ordering::Relaxed);
                        // A reply for a call that already timed out is dropped.
                        if let Some(w) = p.take(id) {
                            let _ = w.send(Ok(msg));
                        }
                    }
                    Err(end) => break end,
                }
            };
            d.store(true, Ordering::Release);
            if matches!(end, ReadEnd::Closed) && p.is_empty() {
                // the server closing a quiet connection (idle timeout, or
                // its slots were full): the next call opens a new one
                tracing::debug!(%peer, "storage RPC connection closed by the server while quiet");
            } else {
                tracing::warn!(%peer, "storage RPC connection ended: {end}");
            }
            p.fail_all(&end.to_string());
        });
        Ok(Conn {
            out,
            pending,
            dead,
            rx_frames,
            peer_max_frame: theirs.max_frame as usize,
            // half: the server counts from when our last bytes arrived, we
            // from when we sent them; the rest is margin for the network
            retire_after: theirs.idle_timeout().map(|t| t / 2),
            born,
            last_used,
            reader,
            writer,
        })
    }

    async fn call_inner(&self, req: Message, deadline: tokio::time::Instant) -> Result<Message, TransportError> {
        let t = self.opts.call_timeout;
        let conn = tokio::time::timeout_at(deadline, self.connection()).await.map_err(|_| TransportError::Timeout(t))??;
        let size = req.head.len() + req.bulk.len();
        if size > conn.peer_max_frame {
            // refused here, alone: sending it would make the server drop
            // the connection and every call on it
            return Err(TransportError::TooLarge(size + HEADER_LEN));
        }
        conn.touch();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if !conn.pending.insert(id, tx) {
            return Err(TransportError::Disconnected(format!("{}: connection closed", self.addr)));
        }
        // Forget the call if we are cancelled or time out, so the map stays small.
        let _guard = Forget(&conn.pending, id);
        let rx_before = conn.rx_frames.load(Ordering::Relaxed);
        let closed = || TransportError::Disconnected(format!("{}: connection closed", self.addr));
        match &conn.out {
            Out::Direct(out) => match tokio::time::timeout_at(deadline, out.send(id, &req)).await {
                Err(_) => return Err(TransportError::Timeout(t)),
                Ok(Err(e)) => return Err(TransportError::Disconnected(format!("{}: {e}", self.addr))),
                Ok(Ok(())) => {}
            },
            Out::Task(tx) => match tokio::time::timeout_at(deadline, tx.send((id, req, ()))).await {
                Err(_) => return Err(TransportError::Timeout(t)),
                Ok(Err(_)) => return Err(closed()),
                Ok(Ok(())) => {}
            },
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(r) => r.unwrap_or_else(|_| Err(closed())),
            Err(_) => {
                // Silence on the whole connection since we sent: the peer is
                // hung or the path is dead (a half-open socket never errors).
                // Give up on this connection; the next call opens a new one.
                if conn.rx_frames.load(Ordering::Relaxed) == rx_before && !conn.dead.swap(true, Ordering::AcqRel) {
                    tracing::warn!(peer = %self.addr, "no reply from the peer within {t:?}; will reconnect");
                }
                Err(TransportError::Timeout(t))
            }
        }
    }
}

struct Forget<'a>(&'a Pending, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.take(self.1);
    }
}

async fn handshake(addr: &str, opts: &TcpClientOptions) -> Result<(Stream, Hello), TransportError> {
    let s = TcpStream::connect(addr).await.map_err(|e| TransportError::Connect(format!("{addr}: {e}")))?;
    s.set_nodelay(true)?;
    let mut s = match &opts.tls {
        None => Stream::Plain(s),
        Some(tls) => tls.connect(addr, s).await.map_err(|e| {
            TransportError::Connect(format!("{addr}: TLS handshake failed: {e} (does the server run with --tls-cert?)"))
        })?,
    };
    let theirs = super::handshake::client(&mut s, addr, opts.max_frame, opts.auth.as_ref()).await?;
    Ok((s, theirs))
}

#[async_trait]
impl RpcClient for TcpClient {
    async fn call(&self, req: Message, _reply_bulk_max: usize) -> Result<Message, TransportError> {
        let deadline = tokio::time::Instant::now() + self.opts.call_timeout;
        self.call_inner(req, deadline).await
    }

    fn describe(&self) -> String {
        format!("tcp://{}", self.addr)
    }
}
