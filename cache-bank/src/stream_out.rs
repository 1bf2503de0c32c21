//! The write side of a stream connection (TCP or UNIX) to a node: the
//! caller writes its batch to the socket itself.
//!
//! A writer task fed by a queue cost every bank request a thread wake-up
//! before a byte left (the caller queues, a worker wakes to write); the
//! profile of a bank-served `stat` showed such wake-ups as most of the
//! gateway's CPU (docs/benchmarks/archive/issue-12-kernel-caching.md, "Where a request's time goes"). Now
//! the caller writes with a non-blocking `write` while nothing is waiting
//! to go out; only what the socket does not take at once is left to the
//! flusher task.
//!
//! Order is kept by one lock: a batch's bytes go out (or are appended to
//! what waits) under it, and so does its place in the queue of replies to
//! come, so replies are matched in the order the node received the
//! commands. The queue is a plain list the reader takes from when reply
//! bytes arrive: a sent batch wakes nobody (a channel would wake the reader
//! once for the batch and again for its reply).

use crate::conn::{Batch, BatchResult, Sink};
use crate::error::BankError;
use crate::reply::Expect;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify};

/// A sent batch waiting for its replies: what to expect, where they go.
pub type Awaited = (Vec<Expect>, oneshot::Sender<BatchResult>);

/// The write half of a stream: a non-blocking write and a wait for room.
pub trait WriteHalf: Send + Sync + 'static {
    fn try_write(&self, bytes: &[u8]) -> io::Result<usize>;
    fn writable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send;
}

macro_rules! write_half {
    ($($t:ty),*) => {$(
        impl WriteHalf for $t {
            fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
                <$t>::try_write(self, bytes)
            }

            async fn writable(&self) -> io::Result<()> {
                <$t>::writable(self).await
            }
        }
    )*};
}

write_half!(tokio::net::tcp::OwnedWriteHalf, tokio::net::unix::OwnedWriteHalf);

/// The batches' way out, shared by the callers and the flusher task.
pub struct StreamOut<W> {
    wr: W,
    node: String,
    /// cleared when the connection breaks
    alive: Arc<AtomicBool>,
    out: Mutex<Out>,
    /// `out.waiting` became non-empty
    more: Notify,
}

struct Out {
    /// bytes the socket has not taken yet, in order
    waiting: Vec<u8>,
    /// batches sent (or waiting to be), oldest first
    awaited: VecDeque<Awaited>,
    closed: bool,
}

impl<W: WriteHalf> StreamOut<W> {
    pub fn new(wr: W, node: String, alive: Arc<AtomicBool>) -> Arc<StreamOut<W>> {
        let out = Mutex::new(Out { waiting: Vec::new(), awaited: VecDeque::new(), closed: false });
        Arc::new(StreamOut { wr, node, alive, out, more: Notify::new() })
    }

    /// Write what the callers left waiting, whenever the socket has room;
    /// returns when the connection breaks.
    pub async fn flush_forever(self: Arc<Self>) {
        loop {
            self.more.notified().await;
            loop {
                if let Err(e) = self.wr.writable().await {
                    return self.broken(&e);
                }
                let mut out = self.lock();
                if out.closed {
                    return;
                }
                if out.waiting.is_empty() {
                    break;
                }
                match self.wr.try_write(&out.waiting) {
                    Ok(n) => drop(out.waiting.drain(..n)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        drop(out);
                        return self.broken(&e);
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest batch whose replies have not been read (the reader's).
    pub fn next_awaited(&self) -> Option<Awaited> {
        self.lock().awaited.pop_front()
    }

    /// The connection broke (`err`): no more batches, and every one still
    /// waiting for replies fails with `err`.
    pub fn fail_all(&self, err: &BankError) {
        self.alive.store(false, Ordering::Release);
        let awaited = {
            let mut out = self.lock();
            Self::close(&mut out);
            std::mem::take(&mut out.awaited)
        };
        for (_, done) in awaited {
            let _ = done.send(Err(err.clone()));
        }
    }

    /// No more batches go out.
    fn close(out: &mut Out) {
        out.closed = true;
        out.waiting.clear();
    }

    fn broken(&self, e: &io::Error) {
        tracing::debug!(node = %self.node, error = %e, "bank write failed");
        self.fail_all(&BankError::Io(self.node.clone(), format!("write failed: {e}")));
    }
}

impl<W: WriteHalf> Sink for StreamOut<W> {
    fn send(&self, batch: Batch) -> Result<(), Batch> {
        let mut out = self.lock();
        if out.closed {
            return Err(batch);
        }
        let Batch { bytes, expect, done } = batch;
        out.awaited.push_back((expect, done));
        if !out.waiting.is_empty() {
            out.waiting.extend_from_slice(&bytes);
            return Ok(());
        }
        let taken = match self.wr.try_write(&bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                // its reply slot is queued: it fails with the connection
                drop(out);
                self.broken(&e);
                return Ok(());
            }
        };
        if taken < bytes.len() {
            out.waiting.extend_from_slice(&bytes[taken..]);
            self.more.notify_one();
        }
        Ok(())
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }
}
