//! # TCP transport for the storage RPC
//!
//! One long-lived connection per (gateway, storage server) pair carries many
//! calls at once; replies are matched to calls by a 64-bit request id, so a
//! slow read never holds up a quick stat behind it.
//!
//! ```text
//!  connect ─> handshake: "IMCA" u16 version u16 0  ──>
//!             <── "IMCA" u16 version u16 status (0 = ok, 1 = version refused)
//!  then frames both ways:
//!    u32 len (bytes after this field) | u64 id | u32 head_len | head | bulk
//! ```
//!
//! Task model: per connection one reader task and one writer task. The writer
//! drains its queue before flushing, so a burst of small replies leaves in one
//! `write` syscall; a large bulk bypasses the buffer and goes straight to the
//! socket (no copy). The reader keeps a `BytesMut` and hands out `Bytes`
//! slices of it, so the bulk of a frame is never copied after the socket read.
//!
//! Faults: a frame that is malformed or longer than `max_frame` drops that
//! connection (logged); the server goes on serving the others. A client call
//! that outlives `call_timeout` fails with [`TransportError::Timeout`]; a call
//! on a dead connection fails at once with `Disconnected`, and the next call
//! reconnects.

mod client;
mod frame;
mod server;

pub use client::{TcpClient, TcpClientOptions};
pub use frame::{Decoded, HEADER_LEN};
pub use server::{serve, ServerOptions};

/// The first four bytes each side sends.
pub const MAGIC: [u8; 4] = *b"IMCA";
/// Bumped whenever the frame layout or the `wire` codec changes incompatibly.
pub const PROTOCOL_VERSION: u16 = 2; // 2: volume config carries `fenced`, its reply the fence requests
/// Default largest frame (head + bulk) either side accepts.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;

#[cfg(test)]
mod tests;
