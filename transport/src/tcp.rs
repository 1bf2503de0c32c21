//! # TCP transport for the storage RPC
//!
//! One long-lived connection per (gateway, storage server) pair carries many
//! calls at once; replies are matched to calls by a 64-bit request id, so a
//! slow read never holds up a quick stat behind it.
//!
//! ```text
//!  connect ─> hello: "IMCA" u16 version u16 0 u32 max_frame u32 0  ──>
//!             <── "IMCA" u16 version u16 status u32 max_frame u32 idle_timeout_ms
//!                 (status 0 = ok; a refusal is only the first 8 bytes:
//!                  1 = version refused, 2 = busy, no connection slot free)
//!  then frames both ways:
//!    u32 len (bytes after this field) | u64 id | u32 head_len | head | bulk
//! ```
//!
//! `max_frame` in a hello is the largest frame (head + bulk) its sender
//! accepts: each side sends only frames the other accepts (a client call too
//! large fails alone with [`TooLarge`](crate::TransportError::TooLarge)).
//! The server's `idle_timeout_ms` tells the client when the server closes a
//! quiet connection; the client stops using one after half of that and opens
//! a fresh one, so a quiet gateway never sees its call race the close.
//! Versions 1–2 sent an 8-byte hello without the limits; such a peer is
//! refused with status 1, which they report as a version mismatch.
//!
//! Task model: per connection one reader task and one writer task (the
//! server adds a task per request and one sweeper for all). The writer
//! drains its queue before flushing, so a burst of small replies leaves in one
//! `write` syscall; a large bulk bypasses the buffer and goes straight to the
//! socket (no copy). The reader keeps a `BytesMut` and hands out `Bytes`
//! slices of it, so the bulk of a frame is never copied after the socket read.
//!
//! Bounded resources (server; [`ServerOptions`]): every byte a connection
//! holds for a client — a request frame being received or served, a reply
//! not yet written — is reserved from the connection's budget and from the
//! server-wide pool first (`budget.rs`); when either is spent the server stops
//! reading that connection, so a client that pipelines without reading its
//! replies waits in its own socket, not in server memory. Sockets that have
//! not finished the hello have their own small set of slots and a deadline;
//! established connections are closed when idle, when a frame or a reply
//! makes no progress, or — when every slot is taken — to make room for a
//! new client, longest-quiet first (`server.rs`, `conn.rs`).
//!
//! Faults: a frame that is malformed or longer than `max_frame` drops that
//! connection (logged); the server goes on serving the others. A client call
//! that outlives `call_timeout` fails with [`TransportError::Timeout`]; a call
//! on a dead connection fails at once with `Disconnected`, and the next call
//! reconnects.
//!
//! [`TransportError::Timeout`]: crate::TransportError::Timeout

mod activity;
mod budget;
mod client;
mod conn;
mod direct_out;
mod frame;
pub mod handshake;
pub mod tls;
mod server;
mod server_options;
mod shared;
mod stats;

pub use client::{TcpClient, TcpClientOptions};
pub use frame::{Decoded, Hello, HEADER_LEN, HELLO_LEN, HELLO_PREFIX, PROOF_LEN};
pub use crate::allow::Cidr;
pub use server::serve;
pub use server_options::ServerOptions;
pub use stats::{Close, ServerStats};

use std::time::Duration;

/// The first four bytes each side sends.
pub const MAGIC: [u8; 4] = *b"IMCA";
/// Bumped whenever the hello, the frame layout or the `wire` codec changes incompatibly.
pub const PROTOCOL_VERSION: u16 = 11; // 3: the hello carries max_frame and idle_timeout_ms; 4: challenge, proofs and a verdict; 5: a write reply carries blocks_before; 6: getattrs; 7: names; 8: holds; 9: lock reclaims; 10: copy_range and fallocate; 11: releases in batches, directory attributes after namespace changes
/// Default largest frame (head + bulk) either side accepts.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;
/// Default established connections a server serves at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default sockets a server lets work on their hello at once (a separate
/// cap from [`DEFAULT_MAX_CONNECTIONS`]; when full, the oldest is dropped).
pub const DEFAULT_MAX_HANDSHAKES: usize = 64;
/// A socket that has not completed the hello by then is closed.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection with nothing in flight that sends nothing for this long is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default bytes one connection may hold (requests received, replies unsent).
pub const DEFAULT_CONN_MEMORY: usize = 64 * 1024 * 1024;
/// Default bytes all connections of a server may hold together.
pub const DEFAULT_SERVER_MEMORY: usize = 256 * 1024 * 1024;

/// "131072", "128K", "64M", "1G" → bytes (command-line sizes).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        Some((i, 'g' | 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n = num.parse::<usize>().map_err(|e| format!("bad size {s:?}: {e}"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

#[cfg(test)]
mod tests;
