//! One long-lived, pipelined text-protocol connection to one node over TCP
//! (or a UNIX stream socket: `unix:/path` nodes; the same tasks).
//!
//! Callers hand in a batch (the encoded commands plus what replies to
//! expect); a writer task writes batches back to back (coalescing whatever
//! is queued into one `write`), and a reader task parses replies in the same
//! order. Order is the point: everything one process sends to one node is
//! applied in the order it was sent, which is what lets the storage server
//! reason about "disk op, then cache op" per file (see smcache).

use crate::conn::{Batch, BatchResult, Conn, Shared};
use crate::error::BankError;
use crate::reply::{BatchParser, Expect};
use bytes::BytesMut;
use std::sync::atomic::Ordering;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

/// TCP's tasks for a [`Conn`]: a writer and a reader.
pub struct TcpConn;

impl TcpConn {
    /// Wrap a connected stream. `SO_LINGER 0` makes every close a reset, so a
    /// node frozen with our bytes unread never applies them after we gave up.
    pub fn start(addr: String, stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        #[allow(deprecated)] // linger 0 never blocks: it resets instead of draining
        let _ = stream.set_linger(Some(std::time::Duration::ZERO));
        let (rd, wr) = stream.into_split();
        Conn::start(addr, "tcp", |rx, shared| Self::spawn(rd, wr, rx, shared))
    }

    /// Wrap a connected UNIX stream socket (a node on this host, `-s`).
    pub fn start_unix(addr: String, stream: UnixStream) -> Conn {
        let (rd, wr) = stream.into_split();
        Conn::start(addr, "unix", |rx, shared| Self::spawn(rd, wr, rx, shared))
    }

    fn spawn<R, W>(rd: R, mut wr: W, mut rx: mpsc::UnboundedReceiver<Batch>, shared: Shared) -> Vec<AbortHandle>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let Shared { addr, alive, pending } = shared;
        let (ptx, prx) = mpsc::unbounded_channel::<(Vec<Expect>, oneshot::Sender<BatchResult>)>();
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
        let p2 = pending.clone();
        let name = addr.clone();
        let reader = tokio::spawn(async move {
            let mut r = ReplyReader { rd, buf: BytesMut::with_capacity(64 * 1024), addr: name.clone() };
            let mut prx = prx;
            while let Some((expect, done)) = prx.recv().await {
                match r.batch(expect).await {
                    Ok(replies) => {
                        p2.fetch_sub(1, Ordering::Relaxed);
                        let _ = done.send(Ok(replies));
                    }
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
        });
        vec![writer.abort_handle(), reader.abort_handle()]
    }
}

struct ReplyReader<R> {
    rd: R,
    buf: BytesMut,
    addr: String,
}

impl<R: AsyncRead + Unpin> ReplyReader<R> {
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

    /// One batch's replies: parse what arrived, read more until complete.
    async fn batch(&mut self, expect: Vec<Expect>) -> BatchResult {
        let mut p = BatchParser::new(expect);
        while !p.feed(&mut self.buf, &self.addr)? {
            self.fill().await?;
        }
        Ok(p.finish())
    }
}
