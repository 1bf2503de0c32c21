//! Attributes, data, open/release, directory listing and statfs.

use crate::tree::{allowed_perm, err, now, Content, Fs};
use crate::{MAX_FILE, MAX_READ};
use bytes::Bytes;
use xlator::*;

impl Fs {
    pub fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        Ok(self.attr(self.resolve(loc)?))
    }

    /// In posix's order: size, owner, permissions, times (a failure leaves
    /// the earlier changes made).
    pub fn setattr(&mut self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let fid = self.resolve(loc)?;
        if let Some(size) = set.size {
            self.file_of(fid)?;
            self.truncate(fid, size)?;
        }
        let i = self.inode_mut(fid);
        if set.uid.is_some() || set.gid.is_some() {
            i.uid = set.uid.unwrap_or(i.uid);
            i.gid = set.gid.unwrap_or(i.gid);
            i.touch_ctime();
        }
        if let Some(perm) = set.perm {
            if i.kind() == FileKind::Symlink {
                // Linux has no way to change a symlink's mode
                return err(libc::EOPNOTSUPP);
            }
            i.perm = allowed_perm(perm);
            i.touch_ctime();
        }
        let at = |t: TimeSet| match t {
            TimeSet::Now => now(),
            TimeSet::At(ts) => ts,
        };
        if set.atime.is_some() || set.mtime.is_some() {
            if let Some(t) = set.atime {
                i.atime = at(t);
            }
            if let Some(t) = set.mtime {
                i.mtime = at(t);
            }
            i.touch_ctime();
        }
        Ok(self.attr(fid))
    }

    /// Change a file's size (open: posix truncates through its data fd).
    pub fn truncate(&mut self, fid: FileId, size: u64) -> FsResult<()> {
        if size > MAX_FILE {
            return err(libc::EFBIG);
        }
        self.cached.insert(fid);
        let i = self.inode_mut(fid);
        if let Content::File(d) = &mut i.content {
            d.resize(size as usize, 0);
        }
        i.touch_mtime();
        Ok(())
    }

    /// A regular file's id, or posix's errno for what it is instead.
    fn file_of(&self, fid: FileId) -> FsResult<FileId> {
        match self.inode(fid).kind() {
            FileKind::File => Ok(fid),
            FileKind::Dir => err(libc::EISDIR),
            _ => err(libc::EINVAL),
        }
    }

    /// The file a data call reaches: an open one by id, whatever the path
    /// says (posix's fd cache), else resolved, and opened from then on.
    pub(crate) fn data(&mut self, loc: &Loc) -> FsResult<FileId> {
        if let Some(fid) = loc.fid.filter(|f| self.cached.contains(f)) {
            return Ok(fid);
        }
        let fid = self.file_of(self.resolve(loc)?)?;
        self.cached.insert(fid);
        Ok(fid)
    }

    pub fn readlink(&self, loc: &Loc) -> FsResult<String> {
        match &self.inode(self.resolve(loc)?).content {
            Content::Symlink(t) => Ok(t.clone()),
            _ => err(libc::EINVAL),
        }
    }

    pub fn open(&mut self, loc: &Loc, flags: i32) -> FsResult<()> {
        let fid = self.resolve(loc)?;
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        match self.inode(fid).kind() {
            FileKind::Dir if writing => err(libc::EISDIR),
            FileKind::File => {
                self.cached.insert(fid);
                if writing && flags & libc::O_TRUNC != 0 {
                    self.truncate(fid, 0)?;
                }
                self.opened(fid);
                Ok(())
            }
            FileKind::Symlink => err(libc::ELOOP),
            // as posix: Linux has no way to open a socket by name
            FileKind::Socket => err(libc::ENXIO),
            _ => Ok(()),
        }
    }

    /// An open file with no name left is gone once its last open is released.
    pub fn release(&mut self, loc: &Loc) {
        if let Some(fid) = loc.fid {
            self.released(fid);
        }
    }

    pub fn read(&mut self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        if size > MAX_READ {
            return err(libc::EINVAL);
        }
        let fid = self.data(loc)?;
        let Content::File(d) = &self.inode(fid).content else { return err(libc::EINVAL) };
        let start = (offset.min(d.len() as u64)) as usize;
        let end = (offset.saturating_add(size as u64).min(d.len() as u64)) as usize;
        Ok(Bytes::copy_from_slice(&d[start..end]))
    }

    pub fn write(&mut self, loc: &Loc, offset: u64, data: &[u8]) -> FsResult<WriteReply> {
        let fid = self.data(loc)?;
        if data.is_empty() {
            let attr = self.write_attr(fid);
            return Ok(WriteReply { written: 0, size_before: Some(attr.size), blocks_before: Some(attr.blocks), attr: Some(attr) });
        }
        let end = offset.checked_add(data.len() as u64).filter(|&e| e <= MAX_FILE).ok_or(FsError::EFBIG)?;
        let blocks_before = Some(self.attr(fid).blocks);
        let i = self.inode_mut(fid);
        let Content::File(d) = &mut i.content else { return err(libc::EINVAL) };
        let size_before = Some(d.len() as u64);
        if (d.len() as u64) < end {
            d.resize(end as usize, 0);
        }
        d[offset as usize..end as usize].copy_from_slice(data);
        i.touch_mtime();
        Ok(WriteReply { written: data.len() as u32, attr: Some(self.write_attr(fid)), size_before, blocks_before })
    }

    /// posix answers a write with nlink at least 1, even for a file whose
    /// last name is gone (it stats the fd and discounts its per-fid link).
    pub(crate) fn write_attr(&self, fid: FileId) -> Attr {
        let mut a = self.attr(fid);
        a.nlink = a.nlink.max(1);
        a
    }

    pub fn fsync(&mut self, loc: &Loc) -> FsResult<()> {
        let fid = self.resolve(loc)?;
        match self.inode(fid).kind() {
            FileKind::File => {
                self.cached.insert(fid);
                Ok(())
            }
            // like posix: a directory is synced; a symlink, fifo, socket or
            // device holds no data of ours and answers at once
            _ => Ok(()),
        }
    }

    pub fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        let dir = self.resolve_dir(loc)?;
        let max = max.clamp(1, 100_000) as usize;
        Ok(self
            .dir(dir)
            .after(cookie)
            .take(max)
            .map(|(name, e)| {
                let attr = self.attr(e.fid);
                DirEntry { name: name.to_string(), kind: attr.kind, fid: e.fid, next: e.cookie, attr: plus.then_some(attr) }
            })
            .collect())
    }

    /// Numbers of a roomy, mostly empty file system.
    pub fn statfs(&self) -> StatFs {
        let bsize = 4096u64;
        let used: u64 = self
            .inodes
            .values()
            .map(|i| match &i.content {
                Content::File(d) => (d.len() as u64).div_ceil(bsize),
                _ => 1,
            })
            .sum();
        let blocks = (64 * MAX_FILE) / bsize;
        let files = 1 << 20;
        StatFs {
            blocks,
            bfree: blocks.saturating_sub(used),
            bavail: blocks.saturating_sub(used),
            files,
            ffree: files.saturating_sub(self.inodes.len() as u64),
            bsize: bsize as u32,
            namelen: 255,
            frsize: bsize as u32,
        }
    }
}
