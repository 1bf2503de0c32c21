//! # gateway-opens — the opens each gateway holds on this storage server
//!
//! ```text
//!  protocol-server ──> [locks] ──> GatewayOpens ──> [upcall] ──> SMCache ──> posix
//!                                    │ open, create: admitted, then counted for the session
//!                                    │ release: passed down only if counted here
//!  every request (protocol-server's tick): gateways silent for GRACE_LEASES leases ──> their opens released below
//! ```
//!
//! Below (posix) a file's open count decides the fate of a file whose last
//! name goes: its data stays until the last release. A gateway that dies
//! never sends its releases, so without this table such a file would hold
//! its space until the server restarts. A gateway silent that long has
//! lost its opens here (its kernel dropped what it cached, too); a release
//! it sends later for one of them is answered without reaching posix, or it
//! would take away another gateway's open. Requests outside a session
//! (tools, tests: `wire::NO_SESSION`) are not counted and pass as before.
//! Bounded: [`MAX_PER_SESSION`] files open per gateway and [`MAX_OPENS`]
//! (gateway, file) pairs in all; past them an open fails with EMFILE.
//!
//! The session comes from [`upcall::session`]; whether a gateway is still
//! there from [`upcall::Leases`]. (Not to be confused with the gateway's
//! own table of open files, which lives in the gateway.)
//!
//! Its place in the graph: above upcall, so an open is admitted (or
//! refused with EMFILE) before upcall records the holds of what a create
//! makes, as before this was a translator; below locks, which a lock
//! request never passes.
//!
//! Task model: the releases of a reaped gateway run in one spawned task.

pub mod table;

pub use table::{OpenTable, GRACE_LEASES, MAX_OPENS, MAX_PER_SESSION};

use async_trait::async_trait;
use std::sync::Arc;
use upcall::{session, Leases};
use xlator::*;

/// The translator over the [`OpenTable`].
pub struct GatewayOpens {
    below: Next,
    table: OpenTable,
    leases: Arc<Leases>,
}

impl GatewayOpens {
    /// Opens counted until a gateway has been silent for [`GRACE_LEASES`]
    /// of `leases`' lease; `imca_storage_opens_reclaimed_total` in `registry`.
    pub fn new(below: Next, leases: Arc<Leases>, registry: &prometheus::Registry) -> GatewayOpens {
        GatewayOpens { below, table: OpenTable::new(leases.lease(), registry), leases }
    }

    /// Called on every request that reaches the server (a file operation or
    /// not: gateways' polls are what keeps this server counting as awake):
    /// release below what gateways whose lease long ran out left open
    /// (looked at once a lease at most).
    pub fn tick(&self) {
        let gone = self.table.reap(&self.leases);
        if gone.is_empty() {
            return;
        }
        let below = self.below.clone();
        tokio::spawn(async move {
            for (fid, n) in gone {
                for _ in 0..n {
                    if let Err(e) = below.release(&Loc::new("", Some(fid))).await {
                        tracing::debug!(?fid, "releasing a lapsed gateway's open: {e:?}");
                    }
                }
            }
        });
    }
}

#[async_trait]
impl Translator for GatewayOpens {
    fn name(&self) -> &str {
        "gateway-opens"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        let session = session::current();
        if let Some(fid) = loc.fid {
            self.table.admit(session, fid)?;
        }
        self.below.open(loc, flags).await?;
        if let Some(fid) = loc.fid {
            self.table.opened(session, fid);
        }
        Ok(())
    }

    /// A create opens what it makes, or the file it finds.
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let session = session::current();
        self.table.admit(session, new.fid)?;
        let m = self.below.create(parent, new, flags).await?;
        self.table.opened(session, m.attr.fid);
        Ok(m)
    }

    /// Passed down only for an open counted here (see the crate page).
    async fn release(&self, loc: &Loc) -> FsResult<()> {
        match loc.fid {
            Some(fid) if !self.table.releasing(session::current(), fid) => Ok(()),
            _ => self.below.release(loc).await,
        }
    }
}
