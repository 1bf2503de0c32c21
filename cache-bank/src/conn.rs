//! One long-lived connection to one node, over TCP or RDMA.
//!
//! Callers hand in a batch (the encoded text-protocol commands plus what
//! replies to expect) and get its replies back. Order is the point, on
//! either transport: everything one process sends to one node is applied in
//! the order it was sent, which is what lets the storage server reason about
//! "disk op, then cache op" per file (see server-translator). TCP keeps it
//! by writing batches to one stream in queue order; RDMA by keeping at most
//! one message in flight per connection (see `rdma.rs`).

use crate::error::BankError;
use crate::reply::{Expect, Reply};
use tokio::sync::oneshot;

pub type BatchResult = Result<Vec<Reply>, BankError>;

pub struct Batch {
    pub bytes: Vec<u8>,
    pub expect: Vec<Expect>,
    pub done: oneshot::Sender<BatchResult>,
}

/// Handle to a live connection; dropping the last one closes it.
pub enum Conn {
    Tcp(crate::tcp::TcpConn),
    Rdma(crate::rdma::RdmaConn),
}

impl Conn {
    pub fn is_alive(&self) -> bool {
        match self {
            Conn::Tcp(c) => c.is_alive(),
                    Conn::Rdma(c) => c.is_alive(),
        }
    }

    /// Batches sent and not yet answered.
    pub fn pending(&self) -> usize {
        match self {
            Conn::Tcp(c) => c.pending(),
                    Conn::Rdma(c) => c.pending(),
        }
    }

    /// Queue a batch; its place in the node's order is fixed when this returns.
    pub fn send(&self, bytes: Vec<u8>, expect: Vec<Expect>) -> oneshot::Receiver<BatchResult> {
        match self {
            Conn::Tcp(c) => c.send(bytes, expect),
                    Conn::Rdma(c) => c.send(bytes, expect),
        }
    }

    /// "tcp" or "rdma", for metrics and logs.
    pub fn transport(&self) -> &'static str {
        match self {
            Conn::Tcp(_) => "tcp",
                    Conn::Rdma(_) => "rdma",
        }
    }
}
