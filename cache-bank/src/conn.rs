//! One long-lived, pipelined text-protocol connection to one node.
//!
//! Callers hand in a batch (the encoded commands plus what replies to
//! expect); a writer task writes batches back to back (coalescing whatever
//! is queued into one `write`), and a reader task parses replies in the same
//! order. Order is the point: everything one process sends to one node is
//! applied in the order it was sent, which is what lets the storage server
//! reason about "disk op, then cache op" per file (see server-translator).

use crate::error::BankError;
use bytes::{Buf, Bytes, BytesMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// What one command answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `get`/`gets`: any number of VALUE blocks, then END
    Values,
    /// set/add/cas/delete/flush_all/version: one line
    Line,
}

/// One parsed reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// (key, value, cas if `gets`)
    Values(Vec<(String, Bytes, Option<u64>)>),
    /// STORED, NOT_STORED, EXISTS, NOT_FOUND, DELETED, OK, VERSION ...
    Line(String),
}

pub type BatchResult = Result<Vec<Reply>, BankError>;

pub struct Batch {
    pub bytes: Vec<u8>,
    pub expect: Vec<Expect>,
    pub done: oneshot::Sender<BatchResult>,
}

/// Handle to a live connection; dropping the last one closes it.
pub struct Conn {
    addr: String,
    tx: mpsc::UnboundedSender<Batch>,
    alive: Arc<AtomicBool>,
    pending: Arc<AtomicUsize>,
    tasks: [tokio::task::AbortHandle; 2],
}

impl Drop for Conn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Conn {
    /// Wrap a connected stream. `SO_LINGER 0` makes every close a reset, so a
    /// node frozen with our bytes unread never applies them after we gave up.
    pub fn start(addr: String, stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        #[allow(deprecated)] // linger 0 never blocks: it resets instead of draining
        let _ = stream.set_linger(Some(std::time::Duration::ZERO));
        let (rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::unbounded_channel::<Batch>();
        let (ptx, prx) = mpsc::unbounded_channel::<(Vec<Expect>, oneshot::Sender<BatchResult>)>();
        let alive = Arc::new(AtomicBool::new(true));
        let a1 = alive.clone();
        let name = addr.clone();
        let writer = tokio::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            while let Some(first) = rx.recv().await {
                buf.clear();
                let mut next = Some(first);
                while let Some(b) = next.take() {
                    buf.extend_from_slice(&b.bytes);
                    if ptx.send((b.expect, b.done)).is_err() {
                        return;
                    }
                    if buf.len() < 256 * 1024 {
                        next = rx.try_recv().ok();
                    }
                }
                if let Err(e) = wr.write_all(&buf).await {
                    tracing::debug!(node = %name, error = %e, "bank write failed");
                    a1.store(false, Ordering::Release);
                    return;
                }
            }
        });
        let a2 = alive.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        let p2 = pending.clone();
        let name = addr.clone();
        let reader = tokio::spawn(async move {
            let mut r = ReplyReader { rd, buf: BytesMut::with_capacity(64 * 1024), addr: name.clone() };
            let mut prx = prx;
            while let Some((expect, done)) = prx.recv().await {
                let mut replies = Vec::with_capacity(expect.len());
                for e in &expect {
                    match r.reply(*e).await {
                        Ok(rep) => replies.push(rep),
                        Err(err) => {
                            a2.store(false, Ordering::Release);
                            let _ = done.send(Err(err.clone()));
                            prx.close();
                            while let Some((_, d)) = prx.recv().await {
                                let _ = d.send(Err(err.clone()));
                            }
                            return;
                        }
                    }
                }
                p2.fetch_sub(1, Ordering::Relaxed);
                let _ = done.send(Ok(replies));
            }
        });
        Conn { addr, tx, alive, pending, tasks: [writer.abort_handle(), reader.abort_handle()] }
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire) && !self.tx.is_closed()
    }

    /// Batches sent and not yet answered.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Queue a batch; its place in the node's order is fixed when this returns.
    pub fn send(&self, bytes: Vec<u8>, expect: Vec<Expect>) -> oneshot::Receiver<BatchResult> {
        let (done, rx) = oneshot::channel();
        self.pending.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.tx.send(Batch { bytes, expect, done }) {
            let _ = e.0.done.send(Err(BankError::Io(self.addr.clone(), "connection closed".into())));
        }
        rx
    }
}

struct ReplyReader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    addr: String,
}

impl ReplyReader {
    async fn fill(&mut self) -> Result<(), BankError> {
        if self.buf.capacity() - self.buf.len() < 16 * 1024 {
            self.buf.reserve(64 * 1024);
        }
        match self.rd.read_buf(&mut self.buf).await {
            Ok(0) => Err(BankError::Io(self.addr.clone(), "connection closed by node".into())),
            Ok(_) => Ok(()),
            Err(e) => Err(BankError::Io(self.addr.clone(), e.to_string())),
        }
    }

    async fn line(&mut self) -> Result<String, BankError> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = self.buf.split_to(i + 2);
                return String::from_utf8(l[..i].to_vec())
                    .map_err(|_| BankError::Protocol(self.addr.clone(), "reply line is not UTF-8".into()));
            }
            if self.buf.len() > 4096 {
                return Err(BankError::Protocol(self.addr.clone(), "reply line too long".into()));
            }
            self.fill().await?;
        }
    }

    async fn exact(&mut self, n: usize) -> Result<Bytes, BankError> {
        while self.buf.len() < n + 2 {
            self.fill().await?;
        }
        let v = self.buf.split_to(n).freeze();
        if &self.buf[..2] != b"\r\n" {
            return Err(BankError::Protocol(self.addr.clone(), "value not followed by CRLF".into()));
        }
        self.buf.advance(2);
        Ok(v)
    }

    async fn reply(&mut self, e: Expect) -> Result<Reply, BankError> {
        match e {
            Expect::Line => {
                let l = self.line().await?;
                if l == "ERROR" || l.starts_with("CLIENT_ERROR") || l.starts_with("SERVER_ERROR") {
                    // the reply is in sync (one line); report it, keep the connection
                    return Ok(Reply::Line(l));
                }
                Ok(Reply::Line(l))
            }
            Expect::Values => {
                let mut vals = Vec::new();
                loop {
                    let l = self.line().await?;
                    if l == "END" {
                        return Ok(Reply::Values(vals));
                    }
                    let mut it = l.split(' ');
                    let (Some("VALUE"), Some(key), Some(_flags), Some(len)) = (it.next(), it.next(), it.next(), it.next())
                    else {
                        if l.starts_with("SERVER_ERROR") || l.starts_with("CLIENT_ERROR") || l == "ERROR" {
                            return Err(BankError::Server(self.addr.clone(), l));
                        }
                        return Err(BankError::Protocol(self.addr.clone(), format!("unexpected reply {l:?}")));
                    };
                    let len: usize =
                        len.parse().map_err(|_| BankError::Protocol(self.addr.clone(), format!("bad length in {l:?}")))?;
                    let cas = it.next().and_then(|c| c.parse().ok());
                    let key = key.to_string();
                    let v = self.exact(len).await?;
                    vals.push((key, v, cas));
                }
            }
        }
    }
}
