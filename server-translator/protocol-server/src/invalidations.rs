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
    ) || matches!(req, Open { flags, .. } if flags & libc::O_TRUNC != 0)
}

/// The inode of the object `req` makes with the id its gateway drew (the
/// gateway holds it from the start: `callbacks::Callbacks::hold_new`).
pub fn made(req: &Request) -> Option<u64> {
    use Request::*;
    match req {
        Create { new, .. } | Mkdir { new, .. } | Mknod { new, .. } | Symlink { new, .. } => Some(new.fid.ino()),
        _ => None,
    }
}

/// The invalidations for `req`, applied with the outcome `reply`.
pub fn of(req: &Request, reply: &Reply) -> Vec<Invalidation> {
    let mut out = Vec::new();
    let attrs = |out: &mut Vec<Invalidation>, loc: &Loc| out.extend(loc.fid.map(Invalidation::attrs));
    // A name that went away (or now names another file): the kernel's entry
    // for it, and the directory's attributes (mtime, nlink, size).
    let gone = |out: &mut Vec<Invalidation>, parent: &Loc, name: &str| {
        if let Some(p) = parent.fid {
            out.push(Invalidation::entry(p, name));
            out.push(Invalidation::attrs(p));
        }
    };
    // A new name: only the directory's attributes. A kernel never holds a
    // name that did not exist (a failed lookup is not cached: FUSE keeps a
    // negative entry only when told to, and the gateway never does), and an
    // entry callback takes the directory's lock in the other kernel, which
    // that kernel holds while its own create in the same directory waits
    // on a server: two gateways creating in one directory would hold each
    // other up for a lease.
    let new_name = |out: &mut Vec<Invalidation>, parent: &Loc| attrs(out, parent);
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
        (Request::Create { parent, flags, .. }, Reply::Attr(a)) => {
            new_name(&mut out, parent);
            if flags & libc::O_TRUNC != 0 {
                out.push(Invalidation::data(a.fid, 0, 0));
            }
        }
        (Request::Mknod { parent, .. } | Request::Mkdir { parent, .. } | Request::Symlink { parent, .. }, _) => {
            new_name(&mut out, parent)
        }
        (Request::Link { loc, newparent, .. }, _) => {
            new_name(&mut out, newparent);
            attrs(&mut out, loc);
        }
        (Request::Unlink { parent, name } | Request::Rmdir { parent, name }, Reply::Removed(r)) => {
            gone(&mut out, parent, name);
            fid_attrs(&mut out, r.fid);
        }
        (Request::Rename { parent, name, newparent, newname, .. }, Reply::Renamed(r)) => {
            gone(&mut out, parent, name);
            // the target name may have named another file
            gone(&mut out, newparent, newname);
            fid_attrs(&mut out, r.moved);
            if let Some(x) = &r.replaced {
                fid_attrs(&mut out, x.fid);
            }
        }
        (Request::Setxattr { loc, .. } | Request::Removexattr { loc, .. }, _) => attrs(&mut out, loc),
        // The kernel truncates by setattr; a raw client may open with O_TRUNC.
        (Request::Open { loc: Loc { fid: Some(fid), .. }, .. }, _) => out.push(Invalidation::data(*fid, 0, 0)),
        _ => {}
    }
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use xlator::{NewFile, Removed, SetAttr, WriteReply};

    fn at(fid: u128) -> Loc {
        Loc::new("d", Some(FileId(fid)))
    }

    #[test]
    fn what_each_mutation_calls_back() {
        let write = Request::Write { loc: at(5), offset: 8192, data: Bytes::from_static(&[1; 100]) };
        let written = Reply::Written(WriteReply { written: 60, attr: None, size_before: None, blocks_before: None });
        assert!(mutates(&write));
        assert_eq!(of(&write, &written), vec![Invalidation::data(FileId(5), 8192, 60)]);

        let truncate = Request::Setattr { loc: at(5), set: SetAttr { size: Some(5000), ..Default::default() } };
        assert_eq!(of(&truncate, &Reply::Unit), vec![Invalidation::data(FileId(5), 4096, 0)]);
        let chmod = Request::Setattr { loc: at(5), set: SetAttr { perm: Some(0o600), ..Default::default() } };
        assert_eq!(of(&chmod, &Reply::Unit), vec![Invalidation::attrs(FileId(5))]);

        // A new name: the directory's attributes only (no entry: see `new_name`).
        let new = NewFile { name: "x".into(), fid: FileId(9), perm: 0o644, owner: Default::default(), exclusive: true };
        let mkdir = Request::Mkdir { parent: at(2), new };
        assert_eq!(of(&mkdir, &Reply::Unit), vec![Invalidation::attrs(FileId(2))]);

        let unlink = Request::Unlink { parent: at(2), name: "x".into() };
        let removed = Reply::Removed(Removed { fid: FileId(9), remaining: None });
        assert_eq!(
            of(&unlink, &removed),
            vec![Invalidation::entry(FileId(2), "x"), Invalidation::attrs(FileId(2)), Invalidation::attrs(FileId(9))]
        );

        let read = Request::Read { loc: at(5), offset: 0, size: 10 };
        assert!(!mutates(&read));
        assert_eq!(of(&read, &Reply::Data(Bytes::new())), vec![]);
    }
}
