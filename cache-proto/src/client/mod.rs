//! The client half of memcached's text protocol: what the bank (or any
//! client) sends and how it reads the answers. No I/O, like the server half.
//!
//! ```text
//!  cache-bank ──request::{request, multi_get}──> bytes ──> node: text::parse ──> Command
//!      ^                                                            │
//!      └── parse::parse <── bytes <── Response::encode <── store results
//! ```
//!
//! Requests are the server half's own [`Command`](crate::text::Command)
//! type, composed here; answers are the shared [`Response`](crate::response::Response).
//! So "what the client meant" and "what the server understood" are the
//! same value, and `tests/round_trip.rs` checks exactly that.

pub mod parse;
pub mod request;

pub use parse::{parse, Invalid, Parsed, MAX_LINE, MAX_VALUE};
pub use request::{multi_get, request, MULTI_GET_LINE};
