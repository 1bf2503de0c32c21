//! What a mutation makes stale in a gateway's kernel: the invalidations a
//! storage server sends other gateways once it has applied a request.
//!
//! Every server that applies (its piece of) a mutation calls back: a file's
//! data unit lives on one server, its attributes are merged from all of them,
//! and a namespace change runs on every server, so the server that changed
//! something always knows it did. Reads, lookups and opens change nothing a
//! kernel caches (atime is not promised).

use wire::{Invalidation, Reply, Request};
use xlator::{FileId, Loc};

/// Whether `req` can change what a kernel caches (then the server keeps a
/// copy of it to work out the invalidations after the reply).
pub fn mutates(req: &Request) -> bool {
    use Request::*;
    matches!(
        req,
        Setattr { .. }
            | Mknod { .. }
            | Mkdir { .. }
            | Create { .. }
            | Symlink { .. }
            | Link { .. }
            | Unlink { .. }
            | Rmdir { .. }
            | Rename { .. }
            | Write { .. }
            | Setxattr { .. }
            | Removexattr { .. }
    )
}

/// The invalidations for `req`, applied with the outcome `reply`.
pub fn of(req: &Request, reply: &Reply) -> Vec<Invalidation> {
    let mut out = Vec::new();
    let attrs = |out: &mut Vec<Invalidation>, loc: &Loc| out.extend(loc.fid.map(Invalidation::attrs));
    // A new or removed name: the entry, and the directory's own attributes
    // (mtime, nlink, size).
    let entry = |out: &mut Vec<Invalidation>, parent: &Loc, name: &str| {
        if let Some(p) = parent.fid {
            out.push(Invalidation::entry(p, name));
            out.push(Invalidation::attrs(p));
        }
    };
    let fid_attrs = |out: &mut Vec<Invalidation>, fid: FileId| out.push(Invalidation::attrs(fid));
    match (req, reply) {
        (Request::Setattr { loc, set }, _) => match (set.size, loc.fid) {
            // The pages from the one holding the new end onwards.
            (Some(size), Some(fid)) => out.push(Invalidation::data(fid, size & !4095, 0)),
            _ => attrs(&mut out, loc),
        },
        (Request::Write { loc, offset, .. }, Reply::Written(w)) => {
            if let Some(fid) = loc.fid {
                out.push(Invalidation::data(fid, *offset, u64::from(w.written.max(1))));
            }
        }
        (Request::Create { parent, new, flags }, Reply::Attr(a)) => {
            entry(&mut out, parent, &new.name);
            if flags & libc::O_TRUNC != 0 {
                out.push(Invalidation::data(a.fid, 0, 0));
            }
        }
        (Request::Mknod { parent, new, .. } | Request::Mkdir { parent, new } | Request::Symlink { parent, new, .. }, _) => {
            entry(&mut out, parent, &new.name)
        }
        (Request::Link { loc, newparent, newname }, _) => {
            entry(&mut out, newparent, newname);
            attrs(&mut out, loc);
        }
        (Request::Unlink { parent, name } | Request::Rmdir { parent, name }, Reply::Removed(r)) => {
            entry(&mut out, parent, name);
            fid_attrs(&mut out, r.fid);
        }
        (Request::Rename { parent, name, newparent, newname, .. }, Reply::Renamed(r)) => {
            entry(&mut out, parent, name);
            entry(&mut out, newparent, newname);
            fid_attrs(&mut out, r.moved);
            if let Some(x) = &r.replaced {
                fid_attrs(&mut out, x.fid);
            }
        }
        (Request::Setxattr { loc, .. } | Request::Removexattr { loc, .. }, _) => attrs(&mut out, loc),
        _ => {}
    }
    out.dedup();
    out
}
