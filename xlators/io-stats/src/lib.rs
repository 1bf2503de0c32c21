//! # io-stats — the top of the client graph (GlusterFS's `debug/io-stats`):
//! counts every operation by result and times it, then passes it on.

use metrics::METRICS;
use async_trait::async_trait;
use std::future::Future;
use std::time::Instant;
use xlator::*;

mod metrics;

pub struct IoStats {
    next: Next,
}

impl IoStats {
    pub fn new(next: Next) -> IoStats {
        std::sync::LazyLock::force(&METRICS);
        IoStats { next }
    }
}

/// A bounded set of `result` label values.
fn result_label<T>(r: &FsResult<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => match *e {
            FsError::ENOENT => "enoent",
            FsError::EEXIST => "eexist",
            FsError::EIO => "eio",
            FsError::ENOTEMPTY => "enotempty",
            FsError::ENODATA => "enodata",
            FsError::EACCES | FsError::EPERM => "eacces",
            FsError::ENOSPC => "enospc",
            _ => "error",
        },
    }
}

async fn timed<T>(op: &'static str, f: impl Future<Output = FsResult<T>>) -> FsResult<T> {
    let start = Instant::now();
    let r = f.await;
    METRICS.duration.with_label_values(&[op]).observe(start.elapsed().as_secs_f64());
    METRICS.ops.with_label_values(&[op, result_label(&r)]).inc();
    r
}

#[async_trait]
impl Translator for IoStats {
    fn name(&self) -> &str {
        "io-stats"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.next)
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        timed("lookup", self.next.lookup(parent, name)).await
    }
    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        timed("getattr", self.next.getattr(loc)).await
    }
    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        timed("setattr", self.next.setattr(loc, set)).await
    }
    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        timed("readlink", self.next.readlink(loc)).await
    }
    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Attr> {
        timed("mknod", self.next.mknod(parent, new, mode, rdev)).await
    }
    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Attr> {
        timed("mkdir", self.next.mkdir(parent, new)).await
    }
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Attr> {
        timed("create", self.next.create(parent, new, flags)).await
    }
    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Attr> {
        timed("symlink", self.next.symlink(parent, new, target)).await
    }
    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Attr> {
        timed("link", self.next.link(loc, newparent, newname)).await
    }
    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        timed("unlink", self.next.unlink(parent, name)).await
    }
    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        timed("rmdir", self.next.rmdir(parent, name)).await
    }
    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        timed("rename", self.next.rename(parent, name, newparent, newname, flags)).await
    }
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        timed("open", self.next.open(loc, flags)).await
    }
    async fn release(&self, loc: &Loc) -> FsResult<()> {
        timed("release", self.next.release(loc)).await
    }
    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        timed("read", self.next.read(loc, offset, size)).await
    }
    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        timed("write", self.next.write(loc, offset, data)).await
    }
    async fn flush(&self, loc: &Loc) -> FsResult<()> {
        timed("flush", self.next.flush(loc)).await
    }
    async fn fsync(&self, loc: &Loc, datasync: bool) -> FsResult<()> {
        timed("fsync", self.next.fsync(loc, datasync)).await
    }
    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        timed("readdir", self.next.readdir(loc, cookie, max, plus)).await
    }
    async fn statfs(&self, loc: &Loc) -> FsResult<StatFs> {
        timed("statfs", self.next.statfs(loc)).await
    }
    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        timed("setxattr", self.next.setxattr(loc, name, value, flags)).await
    }
    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        timed("getxattr", self.next.getxattr(loc, name)).await
    }
    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        timed("listxattr", self.next.listxattr(loc)).await
    }
    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        timed("removexattr", self.next.removexattr(loc, name)).await
    }
}
