//! # coherence — what a gateway may remember of the storage servers' state
//!
//! The top translator of the client graph (GlusterFS's md-cache and upcall
//! client in one): it decides what the kernel may cache and for how long,
//! answers the kernel's re-validations from what it answered before (the
//! memo), asks the servers to wait for this gateway on the inodes the
//! kernel holds (holds), and hears the servers' callbacks as upcalls that
//! travel up the graph from a protocol-client leaf.
//!
//! ```text
//!  FUSE bridge ─ sync API: memo_entry/memo_attr/memo_read, ticket, ttl, held ─┐
//!      │                                                                      │
//!      └─ graph call ─> coherence ─> io-stats ─> CMCache ─> stripe ─> protocol-client × S
//!                         │   ▲                                          │
//!                         │   └──────── upcall (callbacks, lease) ◄──────┘ (each translator, leaf first)
//!                         └─ KernelNotify (the bridge's fuser notifier): inval_inode / inval_entry
//! ```
//!
//! A warm re-validation never enters the graph: the bridge asks the
//! [`KernelCache`] directly (one lock, no allocation), and a request it
//! cannot answer becomes a call on [`Coherence`], whose [`xlator::Stateful`]
//! implementation (`ops`) says, for every data and namespace operation of
//! the table, what it forgets before and what it remembers after. What
//! reaches io-stats is therefore what reached past the memo, as before.
//!
//! What the kernel's open files leave on the servers lives here too: the
//! locks of this gateway's owners (`lock_owners`, asked back from a
//! restarted server: `lock_reclaim`, triggered by the same upcall that
//! drops the kernel's caches), the order of O_APPEND writes (`appends`,
//! which tell the kernel and the memo what they placed where the kernel
//! did not expect it) and the opens sent behind the application's back
//! (`opens_in_flight`, GlusterFS's open-behind).
//!
//! Task model: the holds' registrar runs as one task ([`Coherence::run_holds`]),
//! the releases' sender as another ([`Coherence::run_releases`]);
//! upcalls are delivered by the gateway's poll loops (one per server);
//! kernel notifications run on blocking threads.

mod answered_here;
mod appends;
mod coherence;
mod dirs_ahead;
mod holds;
mod inodes;
mod kernel_cache;
mod kernel_notify;
mod lock_owners;
mod lock_reclaim;
mod memo;
mod memo_names;
mod ops;
mod opens_in_flight;
mod releases;
mod small_files;
mod stat_ahead;

pub use coherence::Coherence;
pub use holds::Holds;
pub use inodes::{Inodes, ROOT_INO};
pub use kernel_cache::{KernelCache, Mode, Ticket};
pub use kernel_notify::KernelNotify;
pub use lock_owners::{fcntl_type, lock_type, request as lock_request, LockOwners};
pub use memo::Asked;
pub use stat_ahead::TRIGGER as STAT_AHEAD_TRIGGER;
