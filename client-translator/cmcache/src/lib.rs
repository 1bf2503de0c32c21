//! # cmcache — CMCache, the gateway's half of IMCa
//!
//! ```text
//!  FUSE bridge -> coherence -> io-stats -> CMCache -> stripe -> protocol-client × S
//!                        │ get / claim+cas
//!                        v
//!                  cache bank (imca cache-node | memcached) × M
//! ```
//!
//! - **lookup**: the directory entry `(parent fid, name)` and — guessed from
//!   the last answer for that name — the child's stat, in one round trip.
//! - **getattr**: the file's merged stat (size = max, blocks = sum, times =
//!   max over servers, exactly as stripe merges it, because it *is* stripe's
//!   answer, stored).
//! - **read**: every covering block, one pipelined multi-get across all
//!   nodes; full hit → assembled here; any miss → forwarded (the owning
//!   storage server populates the blocks while answering); reads forward of
//!   a miss skip the bank for a while (module `cold_reads`).
//! - **create, mkdir, mknod, symlink, link**: the new entry and stat are
//!   claimed before the create and filled from its reply (module `created`).
//! - **readdir with attributes** (READDIRPLUS, stat-ahead): the names from
//!   the servers (`names`: no inode opened), entries and stats from the bank
//!   (module `listing`).
//! - **the first getattr of a directory after a change through this
//!   gateway** is asked of the storage servers directly (module `dirs_changed_here`:
//!   the change deleted it from the bank).
//! - everything else is forwarded: writes are persistent, and the storage
//!   servers (SMCache) fix the bank before they acknowledge.
//!
//! Stat and entries are populated *here*, because only the gateway sees the
//! merged answer: claim the key with a placeholder (`add`, then `gets` for
//! its CAS unique), ask the storage servers, then `cas` the answer in. A
//! server's invalidating delete between claim and cas makes the cas fail,
//! so an answer read before a mutation never lands after it. Any bank error
//! or timeout is a miss; the config comes under a lease (`None` = bypass).

mod cold_reads;
mod dirs_changed_here;
mod created;
mod listing;
pub mod metrics;
mod translator;

pub use translator::{CmCache, HeldConfig};
