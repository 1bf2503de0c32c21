//! The async face of the tree: count the call, take the lock, answer.

use crate::calls::Calls;
use crate::tree::Fs;
use async_trait::async_trait;
use std::sync::{Mutex, MutexGuard};
use xlator::*;

/// The memory leaf translator.
pub struct Memory {
    fs: Mutex<Fs>,
    calls: Calls,
}

impl Default for Memory {
    fn default() -> Self {
        Memory::new()
    }
}

impl Memory {
    /// An empty tree: the root directory only.
    pub fn new() -> Memory {
        Memory { fs: Mutex::new(Fs::new()), calls: Calls::default() }
    }

    /// How many `op` calls reached this leaf.
    pub fn calls(&self, op: Fop) -> u64 {
        self.calls.get(op)
    }

    /// How many calls of any kind reached this leaf.
    pub fn total_calls(&self) -> u64 {
        self.calls.total()
    }

    /// Number of objects kept (the root, named ones, unlinked open files).
    pub fn objects(&self) -> usize {
        self.fs().inodes.len()
    }

    fn fs(&self) -> MutexGuard<'_, Fs> {
        // a panic under the lock (a bug here) must not hide later answers
        self.fs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn on(&self, op: Fop) -> MutexGuard<'_, Fs> {
        self.calls.inc(op);
        self.fs()
    }
}

#[async_trait]
impl xlator::complete::Complete for Memory {
    fn name(&self) -> &str {
        "memory"
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        self.on(Fop::Lookup).lookup(parent, name)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        self.on(Fop::Getattr).getattr(loc)
    }

    async fn getattrs(&self, locs: &[Loc]) -> FsResult<Vec<Option<Attr>>> {
        if locs.len() > MAX_GETATTRS {
            return Err(FsError::EINVAL);
        }
        let fs = self.on(Fop::Getattrs);
        Ok(locs.iter().map(|l| fs.getattr(l).ok()).collect())
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        self.on(Fop::Setattr).setattr(loc, set)
    }

    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        self.on(Fop::Readlink).readlink(loc)
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        self.on(Fop::Mknod).mknod(parent, new, mode, rdev)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        self.on(Fop::Mkdir).mkdir(parent, new)
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        self.on(Fop::Create).create(parent, new, flags)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        self.on(Fop::Symlink).symlink(parent, new, target)
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        self.on(Fop::Link).link(loc, newparent, newname)
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.on(Fop::Unlink).unlink(parent, name)
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.on(Fop::Rmdir).rmdir(parent, name)
    }

    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        self.on(Fop::Rename).rename(parent, name, newparent, newname, flags)
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.on(Fop::Open).open(loc, flags)
    }

    async fn release(&self, loc: &Loc) -> FsResult<()> {
        self.on(Fop::Release).release(loc);
        Ok(())
    }

    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        self.on(Fop::Read).read(loc, offset, size)
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        self.on(Fop::Write).write(loc, offset, &data)
    }

    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        self.on(Fop::Fallocate).fallocate(loc, mode, ranges)
    }

    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        self.on(Fop::CopyRange).copy_range(src, dst, ranges)
    }

    async fn flush(&self, _loc: &Loc) -> FsResult<()> {
        // nothing is buffered (posix answers the same, whatever the loc)
        self.calls.inc(Fop::Flush);
        Ok(())
    }

    async fn fsync(&self, loc: &Loc, _datasync: bool) -> FsResult<()> {
        self.on(Fop::Fsync).fsync(loc)
    }

    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        self.on(Fop::Readdir).readdir(loc, cookie, max, plus)
    }

    async fn names(&self, loc: &Loc, cookie: u64, max: u32) -> FsResult<Vec<DirName>> {
        let listed = self.on(Fop::Names).readdir(loc, cookie, max, false)?;
        Ok(listed.into_iter().map(|e| DirName { name: e.name, next: e.next }).collect())
    }

    /// Locks are the `locks` server translator's, as over posix.
    async fn getlk(&self, _loc: &Loc, _lock: &Lock) -> FsResult<Lock> {
        Err(FsError::ENOSYS)
    }

    async fn setlk(&self, _loc: &Loc, _lock: &Lock, _wait: bool) -> FsResult<()> {
        Err(FsError::ENOSYS)
    }

    async fn statfs(&self, _loc: &Loc) -> FsResult<StatFs> {
        Ok(self.on(Fop::Statfs).statfs())
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.on(Fop::Setxattr).setxattr(loc, name, value, flags)
    }

    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        self.on(Fop::Getxattr).getxattr(loc, name)
    }

    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        self.on(Fop::Listxattr).listxattr(loc)
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.on(Fop::Removexattr).removexattr(loc, name)
    }
}
