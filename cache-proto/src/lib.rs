//! # cache-proto — memcached's wire protocols, both directions, no I/O
//!
//! ```text
//!  server half:  client bytes ──> [cache-node session] ──parse──> text::Frame / binary::Request
//!                                        │                              │
//!                                        └── Response::encode <── store results
//!
//!  client half:  cache-bank ──client::request──> bytes     bytes ──client::parse──> Response
//! ```
//!
//! Three protocols share one TCP port; a connection's first byte decides
//! (0x80 = binary, anything else = text, whose `m?` commands are the meta
//! protocol). Every parser works on a byte slice and answers
//! [`Parse::Done`]`(frame, used)`, [`Parse::Incomplete`] (read more, keep the
//! bytes) or [`Parse::Close`] (memcached would drop the connection). Frames
//! borrow keys and values from the input, so parsing allocates nothing per
//! value. Error replies are memcached 1.6's exact strings, produced here and
//! only here.
//!
//! The [`client`] half composes the same [`text::Command`]s the server half
//! parses, and parses the server's answers into a typed [`response::Response`]
//! (`Done | Incomplete | Invalid(why)`), so a client never matches reply
//! strings of its own.

pub mod binary;
pub mod client;
#[doc(hidden)]
pub mod fuzzing;
pub mod meta;
pub mod num;
pub mod replies;
pub mod response;
pub mod text;

/// memcached's key length limit (`KEY_MAX_LENGTH`).
pub const MAX_KEY_LEN: usize = 250;

/// Outcome of parsing the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// A frame and how many bytes of the input it used.
    Done(T, usize),
    /// Not enough bytes yet; nothing was consumed.
    Incomplete,
    /// The connection must be closed (memcached does so for this input).
    Close,
}

/// First byte of a binary-protocol request.
pub const BINARY_REQ_MAGIC: u8 = 0x80;
