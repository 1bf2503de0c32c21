//! # transport — moving request/reply messages between gateway and servers
//!
//! The storage RPC (`wire`) and, over RDMA, the cache bank exchange
//! *messages*: a small `head` (the encoded operation or reply) and an optional
//! `bulk` payload (write data going out, read data coming back). Keeping head
//! and bulk apart at this boundary is what lets an RDMA transport implement
//! the dissertation's Read-Write design without touching any translator:
//! heads go inline in Sends, a large request bulk is RDMA-Read by the server
//! from the client's advertised buffer, and a reply bulk is RDMA-Written by
//! the server into the buffer the client advertised (`reply_bulk_max`).
//!
//! ```text
//!  protocol-client --RpcClient::call(Message)--> [tcp | rdma] --> RpcService::handle --> protocol-server
//! ```
//!
//! Implementations: TCP (framed, multiplexed, many calls in flight per
//! connection, replies matched by id) and, with the `rdma` feature, verbs.

use async_trait::async_trait;
use bytes::Bytes;

pub mod allow;
mod auth;
pub mod log_gate;
pub mod tcp;
#[cfg(feature = "rdma")]
pub mod rdma;
pub mod select;

/// One request or reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// encoded operation or reply (small; sent inline)
    pub head: Bytes,
    /// bulk payload: write data in a request, read data in a reply
    pub bulk: Bytes,
}

impl Message {
    pub fn new(head: Bytes, bulk: Bytes) -> Message {
        Message { head, bulk }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("connection lost: {0}")]
    Disconnected(String),
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("authentication failed: {0}")]
    Auth(String),
    #[error("protocol violation: {0}")]
    Protocol(String),
    #[error("message too large: {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The client end of a connection: many calls may be in flight at once.
#[async_trait]
pub trait RpcClient: Send + Sync + 'static {
    /// Send `req` and wait for its reply. `reply_bulk_max` is the largest bulk
    /// the caller accepts back (an RDMA transport registers that much for the
    /// server to write into).
    async fn call(&self, req: Message, reply_bulk_max: usize) -> Result<Message, TransportError>;

    /// A short description of the peer and transport, for logs and status.
    fn describe(&self) -> String;
}

/// The server side: turns one request into one reply. Errors are encoded in
/// the reply's head by the service itself; a transport only moves bytes.
#[async_trait]
pub trait RpcService: Send + Sync + 'static {
    async fn handle(&self, req: Message) -> Message;

    /// The largest reply bulk `req` can produce, as far as the service can
    /// tell cheaply (the size a read asks for). A server transport reserves
    /// that much of the connection's memory budget before handling the
    /// request, so pipelined large reads wait in the client's socket rather
    /// than in server memory. The default, 0, suits small replies; a reply
    /// larger than its hint is still sent.
    fn reply_size_hint(&self, _req: &Message) -> usize {
        0
    }
}
