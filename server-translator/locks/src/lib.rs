//! # locks — POSIX and flock locks, on a file's ordering server
//!
//! ```text
//!  protocol-server ──> Locks ──> [gateway-opens] ──> [upcall] ──> SMCache ──> posix
//!                        │ getlk, setlk: answered here, from the LockTable (never below)
//!  Reclaim, and a tidy on each Poll: the LockTable handle protocol-server holds
//! ```
//!
//! GlusterFS's `features/locks` is the model. A lock belongs to the gateway
//! session the request came in ([`upcall::session`]) and lasts while that
//! gateway's kernel-cache lease does ([`upcall::Leases`]), so the table
//! lives in the server's memory, not in the exported file system. The
//! translator sits at the top of the graph: a lock request changes nothing
//! below, and a blocking one waits here without holding anything of the
//! translators below. Everything else passes down.
//!
//! Task model: no tasks of its own; a blocking request waits in its own task.

pub mod table;

pub use table::recovery;
pub use table::{LockTable, HOLD, MAX_LOCKS, MAX_PER_FILE, MAX_PER_SESSION, MAX_WAITERS, MAX_WAITERS_PER_SESSION};

use async_trait::async_trait;
use std::sync::Arc;
use upcall::{session, Leases};
use xlator::*;

/// The locks translator: getlk and setlk from the [`LockTable`].
pub struct Locks {
    below: Next,
    table: Arc<LockTable>,
    /// who is alive: a dead gateway's locks are dropped
    leases: Arc<Leases>,
}

impl Locks {
    pub fn new(below: Next, table: Arc<LockTable>, leases: Arc<Leases>) -> Locks {
        Locks { below, table, leases }
    }

    /// Gateway `session` asks back a lock it held before this server
    /// restarted (protocol-server's Reclaim; see [`recovery`]).
    pub fn reclaim(&self, session: u64, loc: &Loc, lock: Lock) -> FsResult<()> {
        self.table.reclaim(session, loc, lock, &self.leases)
    }

    /// Now and then (every poll): end the grace's gauge, remove the marker
    /// once no lock has been held for a lease.
    pub fn tidy(&self) {
        self.table.tidy()
    }
}

#[async_trait]
impl Translator for Locks {
    fn name(&self) -> &str {
        "locks"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    async fn getlk(&self, loc: &Loc, lock: &Lock) -> FsResult<Lock> {
        self.table.getlk(session::current(), loc, *lock, &self.leases).await
    }

    async fn setlk(&self, loc: &Loc, lock: &Lock, wait: bool) -> FsResult<()> {
        self.table.setlk(session::current(), loc, *lock, wait, &self.leases).await
    }
}
