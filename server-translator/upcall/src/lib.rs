//! # upcall — a storage server's kernel-cache leases and callbacks
//!
//! ```text
//!  protocol-server ──> [locks] ──> [gateway-opens] ──> Upcall ──> SMCache ──> posix
//!    Poll/Hold/Unhold ───────────>  │ Leases (the lease table, a handle protocol-server holds)
//!                                    │ after a mutation below: invalidate(session, items)
//!                                    v
//!              other gateways' polls carry the invalidations; the mutation's
//!              reply waits until each gateway that holds what it names acked
//! ```
//!
//! GlusterFS's `features/upcall` is the model. Gateways let their kernels
//! cache attributes, entries and pages under a lease ([`leases`]); the
//! [`Upcall`] translator works out what each mutation makes stale
//! ([`invalidations`]) once it has been applied below — below SMCache too,
//! so a callback goes out only after the bank changed — and hands it to the
//! lease table, which queues it for every other live gateway and waits for
//! those that hold it. The session a request came in is read from
//! [`session`] (set by protocol-server); the locks and gateway-opens
//! translators read it there too, and ask [`Leases`] whether a gateway is
//! still alive.
//!
//! Task model: no tasks of its own; a held poll and a waiting mutation are
//! the requests' own tasks.

pub mod invalidations;
pub mod leases;
pub mod session;
mod translator;

pub use leases::{Leases, DEFAULT_LEASE};
pub use translator::Upcall;
