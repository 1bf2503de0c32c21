//! # smcache — SMCache, the storage server's half of IMCa
//!
//! ```text
//!  protocol-server -> SMCache -> posix
//!                        │ blocks (add after reads, set after writes),
//!                        │ deletes of stat / dentry / blocks after mutations
//!                        v
//!                  cache bank (imca cache-node | memcached) × M
//! ```
//!
//! ## The coherence promise, server side
//!
//! A mutation is answered only after every bank change it implies has been
//! *confirmed* by the node holding it (or that node's address refused a
//! connection: its process, and every old value it held, is gone). Nothing
//! else is needed to make an acknowledged mutation visible everywhere:
//!
//! - **Blocks** are written only by the storage server that owns them (the
//!   block size divides the stripe unit, so each block lives on exactly one
//!   server). Per file, "disk read, then populate" (shared lock) and "disk
//!   write, then block rewrite" (exclusive lock) are serialised; everything one
//!   server sends one node travels on one ordered connection, so a populate
//!   computed before a write is always applied before that write's update.
//! - **Stat and directory entries** are merged over all servers, so no
//!   server can compute them: the gateway populates them (claim with a
//!   placeholder, read storage, `cas`; see cmcache), and every
//!   server *deletes* the ones a mutation changed, after the disk operation
//!   and before replying. A delete between a gateway's claim and its `cas`
//!   breaks the claim, so a stat read before a mutation never lands after it.
//!   A stat key this server deleted and no request could have refilled since
//!   is not deleted again (`known_empty`), and a file made here whose blocks
//!   were never stored is not rewritten by its writes (`never_cached`).
//! - **A frozen or slow node** is waited for, on the same connection (so a
//!   late value can never overtake a later one), up to a deadline; past it
//!   the node is fenced (the request rides on GetVolumeConfig replies, a
//!   gateway installs it under a new epoch) and the mutation waits out the
//!   old epoch's lease before it is answered. Only when no fence comes
//!   within a few leases is it answered EIO rather than acknowledged
//!   unconfirmed.
//!   A node that died is skipped: when it returns, it returns empty.
//! - **Epochs**: keys carry the volume's epoch; after a config change the
//!   previous epoch's keys are still deleted on mutation for one lease,
//!   because gateways may read them until their lease runs out.
//!
//! Task model: no tasks of its own except threaded-mode repopulates; the
//! bank client runs one reader and one writer task per node connection.

mod bank_changes;
mod file_order;
mod known_empty;
mod layouts;
pub mod metrics;
mod never_cached;
mod translator;

pub use translator::{SmCache, SmOptions, DEFAULT_DEADLINE};
