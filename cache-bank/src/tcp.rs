//! One long-lived, pipelined text-protocol connection to one node over TCP
//! (or a UNIX stream socket: `unix:/path` nodes; the same tasks).
//!
//! Callers hand in a batch (the encoded commands plus what replies to
//! expect) and write it to the socket themselves (see `stream_out`); a
//! reader task parses replies in the same order. Order is the point:
//! everything one process sends to one node is applied in the order it was
//! sent, which is what lets the storage server reason about "disk op, then
//! cache op" per file (see smcache).

use crate::conn::{BatchResult, Conn, Shared, Sink};
use crate::error::BankError;
use crate::reply::{BatchParser, Expect};
use crate::stream_out::{StreamOut, WriteHalf};
use bytes::BytesMut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::task::AbortHandle;

/// TCP's tasks for a [`Conn`]: a flusher for what the socket did not take
/// at once, and a reader.
pub struct TcpConn;

impl TcpConn {
    /// Wrap a connected stream. `SO_LINGER 0` makes every close a reset, so a
    /// node frozen with our bytes unread never applies them after we gave up.
    pub fn start(addr: String, stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        #[allow(deprecated)] // linger 0 never blocks: it resets instead of draining
        let _ = stream.set_linger(Some(std::time::Duration::ZERO));
        let (rd, wr) = stream.into_split();
        Conn::with_sink(addr, "tcp", |shared| Self::spawn(rd, wr, shared))
    }

    /// Wrap a connected UNIX stream socket (a node on this host, `-s`).
    pub fn start_unix(addr: String, stream: UnixStream) -> Conn {
        let (rd, wr) = stream.into_split();
        Conn::with_sink(addr, "unix", |shared| Self::spawn(rd, wr, shared))
    }

    fn spawn<R, W>(rd: R, wr: W, shared: Shared) -> (Arc<dyn Sink>, Vec<AbortHandle>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: WriteHalf,
    {
        let Shared { addr, alive, pending } = shared;
        let out = StreamOut::new(wr, addr.clone(), alive);
        let flusher = tokio::spawn(out.clone().flush_forever());
        let reader = tokio::spawn(read_replies(rd, out.clone(), addr, pending));
        (out, vec![flusher.abort_handle(), reader.abort_handle()])
    }
}

/// Read replies as they come and hand each batch its own, in the order
/// sent; a broken stream fails every batch still waiting.
async fn read_replies<R, W>(rd: R, out: Arc<StreamOut<W>>, addr: String, pending: Arc<AtomicUsize>)
where
    R: AsyncRead + Unpin,
    W: WriteHalf,
{
    let mut r = ReplyReader { rd, buf: BytesMut::with_capacity(64 * 1024), addr };
    let err = loop {
        // A batch is queued before its bytes are written, so bytes that
        // arrive always have their batch queued by then.
        let Some((expect, done)) = out.next_awaited() else {
            if !r.buf.is_empty() {
                break BankError::Io(r.addr.clone(), "the node sent bytes nobody asked for".into());
            }
            if let Err(e) = r.fill().await {
                break e;
            }
            continue;
        };
        match r.batch(expect).await {
            Ok(replies) => {
                pending.fetch_sub(1, Ordering::Relaxed);
                let _ = done.send(Ok(replies));
            }
            Err(e) => {
                let _ = done.send(Err(e.clone()));
                break e;
            }
        }
    };
    out.fail_all(&err);
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
