//! What a mutation makes stale in a gateway's kernel, in the few shapes the
//! [`crate::Upcall`] translator builds every mutation's callbacks from.
//!
//! Every server that applies (its piece of) a mutation calls back: a file's
//! data unit lives on one server, its attributes are merged from all of them,
//! and a namespace change runs on every server, so the server that changed
//! something always knows it did. Reads, lookups and opens without O_TRUNC
//! change nothing a kernel caches (atime is not promised).

use wire::Invalidation;
use xlator::{FileId, Loc};

/// The invalidations one mutation causes, built up shape by shape.
#[derive(Default)]
pub struct Stale(Vec<Invalidation>);

impl Stale {
    pub fn new() -> Stale {
        Stale::default()
    }

    /// The object's attributes (a loc without a file id names nothing a
    /// kernel caches).
    pub fn attrs(self, loc: &Loc) -> Stale {
        match loc.fid {
            Some(fid) => self.attrs_of(fid),
            None => self,
        }
    }

    pub fn attrs_of(mut self, fid: FileId) -> Stale {
        self.0.push(Invalidation::attrs(fid));
        self
    }

    /// A file's pages from `offset`, `len` bytes (0: to the end).
    pub fn pages(mut self, fid: FileId, offset: u64, len: u64) -> Stale {
        self.0.push(Invalidation::data(fid, offset, len));
        self
    }

    /// A name that went away (or now names another file): the kernel's
    /// entry for it, and the directory's attributes (mtime, nlink, size).
    pub fn gone(mut self, parent: &Loc, name: &str) -> Stale {
        if let Some(p) = parent.fid {
            self.0.push(Invalidation::entry(p, name));
            self.0.push(Invalidation::attrs(p));
        }
        self
    }

    /// A new name: only the directory's attributes. A kernel never holds a
    /// name that did not exist (a failed lookup is not cached: FUSE keeps a
    /// negative entry only when told to, and the gateway never does), and an
    /// entry callback takes the directory's lock in the other kernel, which
    /// that kernel holds while its own create in the same directory waits
    /// on a server: two gateways creating in one directory would hold each
    /// other up for a lease.
    pub fn new_name(self, parent: &Loc) -> Stale {
        self.attrs(parent)
    }

    pub fn items(mut self) -> Vec<Invalidation> {
        self.0.dedup();
        self.0
    }
}
