//! The Upcall translator: after a mutation is applied below, the gateways
//! that hold what it changed drop it from their kernels before the reply
//! goes up (docs/design.md, the callbacks section).
//!
//! It is [`Stateful`]: every data and namespace operation of the op table
//! must be placed here, so an operation added to the table does not compile
//! until it says what it makes stale. Reads and controls pass down.

use crate::invalidations::Stale;
use crate::leases::Leases;
use crate::session;
use async_trait::async_trait;
use std::sync::Arc;
use xlator::*;

pub struct Upcall {
    below: Next,
    leases: Arc<Leases>,
}

impl Upcall {
    /// Call back through `leases` after each mutation of `below`; as a
    /// node of the graph ([`InGraph`]: the translator is `.inner()`).
    pub fn new(below: Next, leases: Arc<Leases>) -> InGraph<Upcall> {
        InGraph::new(Arc::new(Upcall { below, leases }))
    }

    /// Send `stale` to the other gateways, and wait until each that holds
    /// some of it dropped it (or its lease ran out).
    async fn call_back(&self, stale: Stale) {
        self.leases.invalidate(session::current(), &stale.items()).await;
    }

    /// The asking gateway holds the object it makes from the start: it is
    /// recorded before the object exists, so nothing about it can be missed.
    fn hold_new(&self, new: &NewFile) {
        self.leases.hold_new(session::current(), new.fid.ino());
    }
}

fn truncates(flags: i32) -> bool {
    flags & libc::O_TRUNC != 0
}

#[async_trait]
impl Stateful for Upcall {
    fn name(&self) -> &str {
        "upcall"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    // ---- data mutations

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let r = self.below.setattr(loc, set).await?;
        let stale = match (set.size, loc.fid) {
            // the pages from the one holding the new end onwards
            (Some(size), Some(fid)) => Stale::new().pages(fid, size & !4095, 0),
            _ => Stale::new().attrs(loc),
        };
        self.call_back(stale).await;
        Ok(r)
    }

    /// Only with O_TRUNC (the kernel truncates by setattr; a raw client may
    /// open with O_TRUNC): the file's pages.
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.below.open(loc, flags).await?;
        if let (true, Some(fid)) = (truncates(flags), loc.fid) {
            self.call_back(Stale::new().pages(fid, 0, 0)).await;
        }
        Ok(())
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        let r = self.below.write(loc, offset, data).await?;
        if let Some(fid) = loc.fid {
            self.call_back(Stale::new().pages(fid, offset, u64::from(r.written.max(1)))).await;
        }
        Ok(r)
    }

    /// As a write: the attributes (size, blocks), and the pages of the
    /// span this server's extents cover when their bytes turned to zeros
    /// (an allocation leaves every byte as it was).
    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let r = self.below.fallocate(loc, mode, ranges).await?;
        let start = ranges.iter().map(|e| e.offset).min();
        let end = ranges.iter().filter_map(|e| e.end()).max();
        let stale = match (mode.zeroes(), loc.fid, start, end) {
            (true, Some(fid), Some(s), Some(e)) => Stale::new().pages(fid, s, e - s),
            _ => Stale::new().attrs(loc),
        };
        self.call_back(stale).await;
        Ok(r)
    }

    /// As a write of the destination: its pages from the first span's
    /// start to the last one's end (one item for the request's spans, which
    /// stripe sends in file order).
    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        let r = self.below.copy_range(src, dst, ranges).await?;
        let start = ranges.iter().map(|s| s.dst).min();
        let end = ranges.iter().map(|s| s.dst.saturating_add(s.len)).max();
        if let (Some(fid), Some(start), Some(end)) = (dst.fid, start, end) {
            self.call_back(Stale::new().pages(fid, start, (end - start).max(1))).await;
        }
        Ok(r)
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.below.setxattr(loc, name, value, flags).await?;
        self.call_back(Stale::new().attrs(loc)).await;
        Ok(())
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.below.removexattr(loc, name).await?;
        self.call_back(Stale::new().attrs(loc)).await;
        Ok(())
    }

    // ---- namespace mutations

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        self.hold_new(new);
        let r = self.below.mknod(parent, new, mode, rdev).await?;
        self.call_back(Stale::new().new_name(parent)).await;
        Ok(r)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        self.hold_new(new);
        let r = self.below.mkdir(parent, new).await?;
        self.call_back(Stale::new().new_name(parent)).await;
        Ok(r)
    }

    /// A new name; with O_TRUNC, an existing file it opened lost its pages.
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        self.hold_new(new);
        let r = self.below.create(parent, new, flags).await?;
        let mut stale = Stale::new().new_name(parent);
        if truncates(flags) {
            stale = stale.pages(r.attr.fid, 0, 0);
        }
        self.call_back(stale).await;
        Ok(r)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        self.hold_new(new);
        let r = self.below.symlink(parent, new, target).await?;
        self.call_back(Stale::new().new_name(parent)).await;
        Ok(r)
    }

    /// A new name, and the file's nlink.
    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        let r = self.below.link(loc, newparent, newname).await?;
        self.call_back(Stale::new().new_name(newparent).attrs(loc)).await;
        Ok(r)
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.below.unlink(parent, name).await?;
        self.call_back(Stale::new().gone(parent, name).attrs_of(r.fid)).await;
        Ok(r)
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.below.rmdir(parent, name).await?;
        self.call_back(Stale::new().gone(parent, name).attrs_of(r.fid)).await;
        Ok(r)
    }

    /// Both names (the target may have named another file), the moved
    /// file's attributes (ctime) and a replaced file's (nlink).
    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        let r = self.below.rename(parent, name, newparent, newname, flags).await?;
        let mut stale = Stale::new().gone(parent, name).gone(newparent, newname).attrs_of(r.moved);
        if let Some(x) = &r.replaced {
            stale = stale.attrs_of(x.fid);
        }
        self.call_back(stale).await;
        Ok(r)
    }
}

#[cfg(test)]
mod tests;
