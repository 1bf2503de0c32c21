//! The async face of [`Posix`]: each call moves to the blocking pool.

use super::Posix;
use async_trait::async_trait;
use std::io;
use std::sync::Arc;
use xlator::*;

/// The posix leaf translator.
#[derive(Clone)]
pub struct PosixTranslator {
    inner: Arc<Posix>,
}

impl PosixTranslator {
    pub fn new(p: Posix) -> PosixTranslator {
        PosixTranslator { inner: Arc::new(p) }
    }

    pub fn posix(&self) -> &Arc<Posix> {
        &self.inner
    }

    async fn run<T, F>(&self, f: F) -> FsResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Posix) -> io::Result<T> + Send + 'static,
    {
        let p = self.inner.clone();
        match tokio::task::spawn_blocking(move || f(&p)).await {
            Ok(r) => r.map_err(FsError::from),
            Err(e) => {
                tracing::error!("posix task failed: {e}");
                Err(FsError::EIO)
            }
        }
    }
}

#[async_trait]
impl xlator::complete::Complete for PosixTranslator {
    fn name(&self) -> &str {
        "posix"
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        if let Some(r) = self.inner.lookup_fast(parent, name) {
            return r.map_err(FsError::from);
        }
        let (p, n) = (parent.clone(), name.to_string());
        self.run(move |x| x.lookup(&p, &n)).await
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        if let Some(r) = self.inner.getattr_fast(loc) {
            return r.map_err(FsError::from);
        }
        let l = loc.clone();
        self.run(move |x| x.getattr(&l)).await
    }

    async fn getattrs(&self, locs: &[Loc]) -> FsResult<Vec<Option<Attr>>> {
        if locs.len() > MAX_GETATTRS {
            return Err(FsError::EINVAL);
        }
        // One blocking task for the whole batch (a listing's): the cached
        // ones cost no syscall, the rest one resolve each.
        let locs = locs.to_vec();
        self.run(move |x| Ok(locs.iter().map(|l| x.getattr_fast(l).unwrap_or_else(|| x.getattr(l)).ok()).collect())).await
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let (l, s) = (loc.clone(), set.clone());
        self.run(move |x| x.setattr(&l, &s)).await
    }

    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        let l = loc.clone();
        self.run(move |x| x.readlink(&l)).await
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        let (p, n) = (parent.clone(), new.clone());
        self.run(move |x| x.mknod(&p, &n, mode, rdev)).await
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        let (p, n) = (parent.clone(), new.clone());
        self.run(move |x| x.mkdir(&p, &n)).await
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let (p, n) = (parent.clone(), new.clone());
        self.run(move |x| x.create(&p, &n, flags)).await
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        let (p, n, t) = (parent.clone(), new.clone(), target.to_string());
        self.run(move |x| x.symlink(&p, &n, &t)).await
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        let (l, p, n) = (loc.clone(), newparent.clone(), newname.to_string());
        self.run(move |x| x.link(&l, &p, &n)).await
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let (p, n) = (parent.clone(), name.to_string());
        self.run(move |x| x.unlink(&p, &n)).await
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let (p, n) = (parent.clone(), name.to_string());
        self.run(move |x| x.rmdir(&p, &n)).await
    }

    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        let (p, n, np, nn) = (parent.clone(), name.to_string(), newparent.clone(), newname.to_string());
        self.run(move |x| x.rename(&p, &n, &np, &nn, flags)).await
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        let l = loc.clone();
        self.run(move |x| x.open(&l, flags)).await
    }

    async fn release(&self, loc: &Loc) -> FsResult<()> {
        // Opens are counted per file in the fd cache; the last release of a
        // file with no name left closes its fd, which frees its space.
        match loc.fid {
            Some(fid) => self.run(move |x| x.release_fid(fid)).await,
            None => Ok(()),
        }
    }

    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        if let Some(r) = self.inner.read_fast(loc, offset, size) {
            return r.map_err(FsError::from);
        }
        let l = loc.clone();
        self.run(move |x| x.read(&l, offset, size)).await
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        let l = loc.clone();
        self.run(move |x| x.write(&l, offset, &data)).await
    }

    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let (l, r) = (loc.clone(), ranges.to_vec());
        self.run(move |x| x.fallocate(&l, mode, &r)).await
    }

    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        let (s, d, spans) = (src.clone(), dst.clone(), ranges.to_vec());
        self.run(move |x| x.copy_range(&s, &d, &spans)).await
    }

    async fn flush(&self, _loc: &Loc) -> FsResult<()> {
        // Writes go straight to the file with pwrite; nothing is buffered here.
        Ok(())
    }

    async fn fsync(&self, loc: &Loc, datasync: bool) -> FsResult<()> {
        let l = loc.clone();
        self.run(move |x| x.fsync(&l, datasync)).await
    }

    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        let l = loc.clone();
        self.run(move |x| x.readdir(&l, cookie, max, plus)).await
    }

    async fn names(&self, loc: &Loc, cookie: u64, max: u32) -> FsResult<Vec<DirName>> {
        let l = loc.clone();
        self.run(move |x| x.names(&l, cookie, max)).await
    }

    /// Locks are answered above posix, by the `locks` server translator
    /// (one lock table per server, per gateway session): none reach here.
    async fn getlk(&self, _loc: &Loc, _lock: &Lock) -> FsResult<Lock> {
        Err(FsError::ENOSYS)
    }

    async fn setlk(&self, _loc: &Loc, _lock: &Lock, _wait: bool) -> FsResult<()> {
        Err(FsError::ENOSYS)
    }

    async fn statfs(&self, _loc: &Loc) -> FsResult<StatFs> {
        self.run(move |x| x.statfs()).await
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        let (l, n, v) = (loc.clone(), name.to_string(), value.to_vec());
        self.run(move |x| x.setxattr(&l, &n, &v, flags)).await
    }

    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        let (l, n) = (loc.clone(), name.to_string());
        self.run(move |x| x.getxattr(&l, &n)).await
    }

    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        let l = loc.clone();
        self.run(move |x| x.listxattr(&l)).await
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        let (l, n) = (loc.clone(), name.to_string());
        self.run(move |x| x.removexattr(&l, &n)).await
    }
}
