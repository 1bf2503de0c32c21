//! The `Translator` trait: one async method per file operation.
//!
//! Like GlusterFS's `_default_fops`, every method defaults to handing the call
//! to the next translator unchanged, so a translator overrides only what it
//! changes (io-stats times everything; CMCache overrides lookup/getattr/read;
//! SMCache wraps the mutations). Leaves (posix, protocol-client) and fan-out
//! translators (stripe) override every method and return `None` from
//! [`Translator::next`]; a call that reaches a translator with neither an
//! override nor a next one fails with `ENOSYS` rather than panicking.

use crate::error::{FsError, FsResult};
use crate::types::*;
use async_trait::async_trait;
use std::sync::Arc;

/// The translator below this one.
pub type Next = Arc<dyn Translator>;

/// What unlink/rmdir removed: the victim's id and, when it still has other
/// hard links, its attributes afterwards (nlink decremented).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Removed {
    pub fid: FileId,
    pub remaining: Option<Attr>,
}

/// What rename moved and, when it replaced an existing target, what happened
/// to the target (same shape as unlink's answer).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Renamed {
    pub moved: FileId,
    pub replaced: Option<Removed>,
}

#[async_trait]
pub trait Translator: Send + Sync + 'static {
    /// Short name for logs and the admin API's pipeline listing.
    fn name(&self) -> &str;

    /// The translator below, if this one passes calls on.
    fn next(&self) -> Option<&Next> {
        None
    }

    /// The next translator, or ENOSYS for a leaf that did not override a call.
    fn below(&self) -> FsResult<&Next> {
        self.next().ok_or(FsError::ENOSYS)
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        self.below()?.lookup(parent, name).await
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        self.below()?.getattr(loc).await
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        self.below()?.setattr(loc, set).await
    }

    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        self.below()?.readlink(loc).await
    }

    /// `mode` carries the file-type bits (S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK).
    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Attr> {
        self.below()?.mknod(parent, new, mode, rdev).await
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Attr> {
        self.below()?.mkdir(parent, new).await
    }

    /// Create a regular file (and open it: `flags` are the open(2) flags).
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Attr> {
        self.below()?.create(parent, new, flags).await
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Attr> {
        self.below()?.symlink(parent, new, target).await
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Attr> {
        self.below()?.link(loc, newparent, newname).await
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.below()?.unlink(parent, name).await
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.below()?.rmdir(parent, name).await
    }

    async fn rename(
        &self,
        parent: &Loc,
        name: &str,
        newparent: &Loc,
        newname: &str,
        flags: RenameFlags,
    ) -> FsResult<Renamed> {
        self.below()?.rename(parent, name, newparent, newname, flags).await
    }

    /// Opening is stateless end to end (servers keep a bounded fd cache keyed
    /// by file id); this call checks existence and access mode.
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.below()?.open(loc, flags).await
    }

    async fn release(&self, loc: &Loc) -> FsResult<()> {
        self.below()?.release(loc).await
    }

    /// Read up to `size` bytes at `offset`; short only at end of file.
    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        self.below()?.read(loc, offset, size).await
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        self.below()?.write(loc, offset, data).await
    }

    async fn flush(&self, loc: &Loc) -> FsResult<()> {
        self.below()?.flush(loc).await
    }

    async fn fsync(&self, loc: &Loc, datasync: bool) -> FsResult<()> {
        self.below()?.fsync(loc, datasync).await
    }

    /// List up to `max` entries after `cookie` (0 = from the start; each entry
    /// carries the cookie that continues after it). `plus` fills `attr`.
    /// "." and ".." are not included; the FUSE layer adds them.
    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        self.below()?.readdir(loc, cookie, max, plus).await
    }

    async fn statfs(&self, loc: &Loc) -> FsResult<StatFs> {
        self.below()?.statfs(loc).await
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.below()?.setxattr(loc, name, value, flags).await
    }

    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        self.below()?.getxattr(loc, name).await
    }

    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        self.below()?.listxattr(loc).await
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.below()?.removexattr(loc, name).await
    }
}
