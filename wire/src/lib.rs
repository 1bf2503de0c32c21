//! # wire — the storage RPC's codec
//!
//! Every operation of the op table (`xlator::for_each_fop!`, which also gives
//! each its opcode and field names) and its reply, encoded into a
//! [`transport::Message`]: a compact binary `head` plus a `bulk` that carries
//! write data (requests) or read data (replies) untouched, so a payload is
//! never copied by the codec. Framing, request ids and the versioned
//! handshake belong to the transport (`transport::tcp`, later RDMA); this
//! crate does no I/O.
//!
//! ```text
//!  protocol-client ── Request::encode ──> Message ══transport══> Request::decode ── protocol-server
//!                  <── decode_reply ────  Message <══transport══ encode_reply ──
//! ```
//!
//! Head layout: request = `u8 opcode` + fields; reply = `u64 epoch` (the
//! server's current volume-config epoch, so gateways notice a change on any
//! reply) + `u8 tag` (0 = error followed by `i32 errno`) + fields. Integers
//! are little-endian and fixed-width, strings and lists are `u32`-length
//! prefixed, options are a `u8` presence flag. Any malformed head decodes to a
//! [`WireError`], never a panic.
//!
//! The volume-config messages (`GetVolumeConfig`, `SetVolumeConfig`) travel on
//! the same connection: the server accepts a new config only when its epoch is
//! exactly the current one + 1 (compare-and-set on the epoch,
//! `volume::acceptable`), and otherwise answers with the config it keeps.

mod callback;
mod codec;
mod reply;
mod request;

pub use callback::{Invalidation, NO_SESSION};
pub use reply::{decode_reply, encode_reply, Reply, ReplyMsg, ReplyShape};
pub use request::{Op, Request, MAX_HOLD, MAX_RELEASES};

/// How long a server holds a blocking lock request (`Setlk` with `wait`)
/// before it answers "ask again" (EAGAIN): part of the protocol, since a
/// client's timeout must be longer.
pub const LOCK_HOLD: std::time::Duration = std::time::Duration::from_secs(3);

/// Why a head could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("message truncated")]
    Truncated,
    #[error("unknown {what} tag {tag}")]
    BadTag { what: &'static str, tag: u8 },
    #[error("string is not UTF-8")]
    BadUtf8,
    #[error("{0} unexpected trailing bytes")]
    Trailing(usize),
    #[error("length {0} exceeds the message")]
    BadLength(u64),
}

pub use xlator::XATTR_SIZE_MAX;

#[cfg(test)]
mod tests;
