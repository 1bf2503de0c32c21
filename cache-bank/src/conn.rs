//! One long-lived connection to one node, over TCP or RDMA.
//!
//! Callers hand in a batch (the encoded text-protocol commands plus what
//! replies to expect) and get its replies back. Order is the point, on
//! either transport: everything one process sends to one node is applied in
//! the order it was sent, which is what lets the storage server reason about
//! "disk op, then cache op" per file (see smcache). TCP keeps it
//! by writing batches to one stream in queue order; RDMA by keeping at most
//! one message in flight per connection (see `rdma.rs`).

use crate::error::BankError;
use crate::reply::{Expect, Reply};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

pub type BatchResult = Result<Vec<Reply>, BankError>;

pub struct Batch {
    pub bytes: Vec<u8>,
    pub expect: Vec<Expect>,
    pub done: oneshot::Sender<BatchResult>,
}

/// What a transport's tasks share with the [`Conn`] handle.
pub struct Shared {
    pub addr: String,
    /// cleared by the tasks when the connection breaks
    pub alive: Arc<AtomicBool>,
    /// batches sent and not yet answered (the tasks count answers down)
    pub pending: Arc<AtomicUsize>,
}

/// Where a connection's batches go, each behind every batch sent before it.
pub trait Sink: Send + Sync + 'static {
    /// Queue `batch`, or give it back if the connection is closed.
    fn send(&self, batch: Batch) -> Result<(), Batch>;
    fn is_closed(&self) -> bool;
}

/// A queue served by the transport's task (RDMA: one message in flight).
impl Sink for mpsc::UnboundedSender<Batch> {
    fn send(&self, batch: Batch) -> Result<(), Batch> {
        mpsc::UnboundedSender::send(self, batch).map_err(|e| e.0)
    }

    fn is_closed(&self) -> bool {
        mpsc::UnboundedSender::is_closed(self)
    }
}

/// Handle to a live connection; dropping it stops its tasks (which closes
/// the socket or the queue pair).
pub struct Conn {
    addr: String,
    sink: Arc<dyn Sink>,
    alive: Arc<AtomicBool>,
    pending: Arc<AtomicUsize>,
    transport: &'static str,
    tasks: Vec<AbortHandle>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Conn {
    /// Start a connection: `spawn` starts the transport's tasks, which serve
    /// the batch queue in order, and returns them.
    pub fn start(
        addr: String,
        transport: &'static str,
        spawn: impl FnOnce(mpsc::UnboundedReceiver<Batch>, Shared) -> Vec<AbortHandle>,
    ) -> Conn {
        let (tx, rx) = mpsc::unbounded_channel::<Batch>();
        Conn::with_sink(addr, transport, |shared| (Arc::new(tx), spawn(rx, shared)))
    }

    /// Start a connection whose batches go to the [`Sink`] that `start`
    /// makes (with the tasks behind it).
    pub fn with_sink(
        addr: String,
        transport: &'static str,
        start: impl FnOnce(Shared) -> (Arc<dyn Sink>, Vec<AbortHandle>),
    ) -> Conn {
        let alive = Arc::new(AtomicBool::new(true));
        let pending = Arc::new(AtomicUsize::new(0));
        let shared = Shared { addr: addr.clone(), alive: alive.clone(), pending: pending.clone() };
        let (sink, tasks) = start(shared);
        Conn { addr, sink, alive, pending, transport, tasks }
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire) && !self.sink.is_closed()
    }

    /// Batches sent and not yet answered.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Queue a batch; its place in the node's order is fixed when this returns.
    pub fn send(&self, bytes: Vec<u8>, expect: Vec<Expect>) -> oneshot::Receiver<BatchResult> {
        let (done, rx) = oneshot::channel();
        self.pending.fetch_add(1, Ordering::Relaxed);
        if let Err(b) = self.sink.send(Batch { bytes, expect, done }) {
            let _ = b.done.send(Err(BankError::Io(self.addr.clone(), "connection closed".into())));
        }
        rx
    }

    /// "tcp" or "rdma", for metrics and logs.
    pub fn transport(&self) -> &'static str {
        self.transport
    }
}
