//! # cache-bank — the client of a bank of memcached-compatible nodes
//!
//! Both IMCa translators talk to the bank through this crate: the gateway's
//! CMCache reads stat, directory entries and data blocks, and claims keys
//! it populates; each storage server's SMCache writes blocks and invalidates
//! what a mutation changed.
//!
//! ```text
//!  CMCache (gateway) ──get_many / claim_many──┐        ┌─> node 0 (imca cache-node | memcached)
//!                                             ├─ Bank ─┼─> node 1
//!  SMCache (storage server) ──update──────────┘        └─> node M-1
//! ```
//!
//! - [`placement`]: CRC32 (the dissertation's default), modulo striping of a
//!   file's consecutive blocks, ketama-compatible consistent hashing.
//! - [`Bank`]: one pipelined batch per node, all nodes in parallel, so a
//!   read of N blocks is one round trip; errors and timeouts are misses and
//!   back the node off; writers wait for acknowledgements in order.
//! - [`keys`] and [`value`]: key naming (by file id, never by path) and the
//!   value payloads; [`Codec`] (`codec.rs`): their framing, MAC-checked
//!   under the volume key (optionally encrypted), so a value anyone on the
//!   cache network could write is never taken for ours; refusals are
//!   misses, counted and logged at a bounded rate (`rejects.rs`).
//! - [`Credentials`]: the login to nodes that run memcached's ASCII
//!   authentication (`-Y`), sent first on every connection.
//! - [`layout`]: the keys and bank under one volume config, built once for
//!   both translators.
//!
//! Speaks memcached's classic text protocol (get/gets/set/add/cas/delete),
//! which every memcached-compatible server implements identically; values
//! are length-prefixed there, so any byte is allowed. Requests are composed
//! and responses parsed by `cache_proto::client` (the same crate, and the
//! same types, as the cache node's side); `reply.rs` gathers a
//! batch's typed responses the same way for either transport:
//!
//! - TCP (`tcp.rs`): per node connection, one writer task and one reader
//!   task (replies arrive in request order); the same tasks over a UNIX
//!   stream socket for a node named `unix:/path` (a node on this host, `-s`);
//! - RDMA (`rdma.rs`, cargo feature `rdma`, [`BankOptions::rdma`]): the same
//!   batches as RDMA messages to the node's RDMA listener, one message in
//!   flight per connection, multi-get values RDMA-Written into our buffers.

mod bank;
pub mod cli;
pub mod codec;
mod conn;
pub mod credentials;
mod error;
pub mod keys;
pub mod layout;
mod md5;
pub mod metrics;
mod node;
pub mod placement;
mod rdma;
pub mod rejects;
mod reply;
mod stream_out;
mod tcp;
pub mod value;

pub use bank::{Bank, BankOptions, Hit, Update};
pub use cli::BankArgs;
pub use codec::Codec;
pub use credentials::{Credentials, CredentialsError};
pub use error::BankError;
pub use keys::Keys;
pub use layout::{Layout, LayoutSlot};
pub use metrics::BankMetrics;
pub use placement::{CacheKey, Ring};
