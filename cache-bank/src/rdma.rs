//! One connection to one node over RDMA (the node's `--transport rdma` /
//! `--rdma` listener, cache-node/src/rdma.rs).
//!
//! The same text-protocol batches as over TCP, one RDMA message per round
//! trip: the request bulk is the batches' bytes (inline in the Send when
//! small; a large set payload is RDMA-Read by the node from our buffer), and
//! the reply bulk is exactly what memcached would have written to a socket
//! (a multi-get's values are RDMA-Written straight into our registered
//! buffer and parsed in place by the same [`BatchParser`] as TCP's).
//!
//! Ordering: one task per connection keeps **at most one message in
//! flight**. Batches queued while it is out are coalesced into the next
//! message, in queue order, and the node executes a message's commands in
//! order, so everything this process sends to the node is applied in send
//! order, as over TCP's single stream. (The RDMA transport itself may run a
//! connection's messages concurrently on the node, which is why we never
//! give it two at once.) Coalescing also keeps the round-trip count of a
//! burst at TCP's: one message per burst instead of one per batch.
//!
//! Login (`-Y` nodes): the node serves each RDMA message as a session of
//! its own, so with credentials every message starts with the login
//! command, and its `STORED` is taken off the reply before the batches'
//! replies are handed out; anything else fails the connection.

use crate::conn::{Batch, BatchResult, Conn};
use crate::error::BankError;
use crate::reply::{BatchParser, Expect, Reply};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use transport::{Message, RpcClient, TransportError};

/// Stop coalescing queued batches beyond this many bytes (TCP's write size).
const COALESCE_MAX: usize = 256 << 10;
/// Room for one line reply: STORED, NOT_FOUND, `SERVER_ERROR <why>`, VERSION.
const LINE_REPLY_MAX: usize = 128;
/// `VALUE <key> <flags> <len> <cas>\r\n` and the `\r\n` after the data, with
/// a key of memcached's maximum length (250).
const VALUE_OVERHEAD: usize = "VALUE  4294967295 4294967295 18446744073709551615\r\n\r\n".len() + 250;
/// What a value is assumed to weigh before this connection has seen any:
/// a stat or directory entry is ~100 bytes, a small block a few KiB.
const FIRST_VALUE_GUESS: usize = 4 << 10;
/// The largest reply region offered up front: the transport's largest
/// pre-registered size class (4 MiB), so offering it costs no registration.
const REPLY_REGION_CAP: usize = 4 << 20;

/// RDMA's task for a [`Conn`]; aborting it drops the client, which closes the QP.
pub struct RdmaConn;

impl RdmaConn {
    /// Serve batches over `client` (already connected: the handshake succeeded).
    /// `login`: the login command to put before every message's batches.
    pub fn start(addr: String, client: Arc<dyn RpcClient>, login: Option<Vec<u8>>) -> Conn {
        Conn::start(addr, "rdma", |rx, s| {
            vec![tokio::spawn(run(s.addr, client, login, rx, s.alive, s.pending)).abort_handle()]
        })
    }
}

async fn run(
    addr: String,
    client: Arc<dyn RpcClient>,
    login: Option<Vec<u8>>,
    mut rx: mpsc::UnboundedReceiver<Batch>,
    alive: Arc<AtomicBool>,
    pending: Arc<AtomicUsize>,
) {
    let mut value_guess = FIRST_VALUE_GUESS;
    while let Some(first) = rx.recv().await {
        let mut batches = vec![first];
        let mut len = batches[0].bytes.len();
        while len < COALESCE_MAX {
            match rx.try_recv() {
                Ok(b) => {
                    len += b.bytes.len();
                    batches.push(b);
                }
                Err(_) => break,
            }
        }
        let bytes = if batches.len() == 1 && login.is_none() {
            std::mem::take(&mut batches[0].bytes)
        } else {
            let mut all = Vec::with_capacity(len + login.as_ref().map_or(0, Vec::len));
            all.extend_from_slice(login.as_deref().unwrap_or_default());
            for b in &batches {
                all.extend_from_slice(&b.bytes);
            }
            all
        };
        let failed = match exchange(client.as_ref(), &addr, bytes, &batches, value_guess).await {
            Ok(mut reply) => match logged_in(&mut reply, login.is_some(), &addr) {
                Ok(()) => deliver(&mut reply, batches, &addr, &pending, &mut value_guess),
                Err(e) => Some((e, batches.into_iter().map(|b| b.done).collect())),
            },
            Err(e) => {
                tracing::debug!(node = %addr, error = %e, "bank RDMA call failed");
                Some((BankError::Io(addr.clone(), e.to_string()), batches.into_iter().map(|b| b.done).collect()))
            }
        };
        if let Some((err, rest)) = failed {
            alive.store(false, Ordering::Release);
            for done in rest {
                let _ = done.send(Err(err.clone()));
            }
            rx.close();
            while let Some(b) = rx.recv().await {
                let _ = b.done.send(Err(err.clone()));
            }
            return;
        }
    }
}

/// One round trip. `reply_bulk_max` is derived from the batches (see
/// [`reply_bound`]); if the node's reply is larger after all, the transport
/// reports the exact size and we ask once more with that much room. The
/// repeat is safe: the node already applied the message, and applying it
/// again right after, with nothing of ours in between (one message in
/// flight), changes nothing — get/gets read, set/delete are idempotent, and
/// a repeated add/cas only answers NOT_STORED/EXISTS, which callers accept.
async fn exchange(
    client: &dyn RpcClient,
    addr: &str,
    bytes: Vec<u8>,
    batches: &[Batch],
    value_guess: usize,
) -> Result<Bytes, TransportError> {
    let msg = Message::new(Bytes::new(), Bytes::from(bytes));
    let room = reply_bound(batches, value_guess);
    match client.call(msg.clone(), room).await {
        Err(TransportError::TooLarge(n)) if n > room => {
            tracing::debug!(node = %addr, room, needed = n, "bank RDMA reply larger than offered; asking again");
            client.call(msg, n).await.map(|m| m.bulk)
        }
        r => r.map(|m| m.bulk),
    }
}

/// Room for the replies of `batches`: a line per line command, and per key
/// asked for one value as large as the largest this connection has seen
/// (`value_guess`). Bounded by the batch rather than a huge constant, so a
/// stat lookup does not pin megabytes; capped at the largest pooled buffer
/// (larger replies pay a one-off registration via the retry in [`exchange`]).
fn reply_bound(batches: &[Batch], value_guess: usize) -> usize {
    // (a line more than the batches need: a login's reply, when we send one)
    let mut n = LINE_REPLY_MAX;
    for e in batches.iter().flat_map(|b| &b.expect) {
        n += match e {
            Expect::Line => LINE_REPLY_MAX,
            Expect::Values(keys) => "END\r\n".len() + *keys as usize * (VALUE_OVERHEAD + value_guess),
        };
    }
    n.min(REPLY_REGION_CAP)
}

/// Take the login's reply off the front of `reply` (when we sent one).
fn logged_in(reply: &mut Bytes, sent: bool, addr: &str) -> Result<(), BankError> {
    if !sent {
        return Ok(());
    }
    let mut p = BatchParser::new(vec![Expect::Line]);
    match p.feed(reply, addr)? {
        true => match p.finish().pop() {
            Some(Reply::Line(cache_proto::response::Response::Status(cache_proto::response::Status::Stored))) => Ok(()),
            other => Err(BankError::Server(addr.into(), format!("refused our credentials: {other:?}"))),
        },
        false => Err(BankError::Protocol(addr.into(), "RDMA reply ends inside the login's".into())),
    }
}

/// Hand each batch its replies, in order. On a malformed reply: the batches
/// before it are answered, the error and the rest are returned.
fn deliver(
    reply: &mut Bytes,
    batches: Vec<Batch>,
    addr: &str,
    pending: &AtomicUsize,
    value_guess: &mut usize,
) -> Option<(BankError, Vec<oneshot::Sender<BatchResult>>)> {
    let mut it = batches.into_iter();
    while let Some(Batch { expect, done, .. }) = it.next() {
        let mut p = BatchParser::new(expect);
        let res = match p.feed(reply, addr) {
            Ok(true) => Ok(p.finish()),
            Ok(false) => Err(BankError::Protocol(addr.into(), "RDMA reply ends inside a batch".into())),
            Err(e) => Err(e),
        };
        match res {
            Ok(replies) => {
                for r in &replies {
                    if let Reply::Values(vals) = r {
                        *value_guess = vals.iter().map(|v| v.data.len()).fold(*value_guess, usize::max);
                    }
                }
                pending.fetch_sub(1, Ordering::Relaxed);
                let _ = done.send(Ok(replies));
            }
            Err(e) => {
                let mut rest = vec![done];
                rest.extend(it.map(|b| b.done));
                return Some((e, rest));
            }
        }
    }
    if !reply.is_empty() {
        // Answered more than was asked: out of step, so nothing later can be trusted.
        return Some((BankError::Protocol(addr.into(), "RDMA reply has trailing bytes".into()), Vec::new()));
    }
    None
}
