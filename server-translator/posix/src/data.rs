//! Data, directory listing and statfs operations (synchronous).

use super::sys::{self, err, raw};
use super::{kind_of, Obj, Posix, MAX_READ};
use xlator::names::is_hidden;
use bytes::{Bytes, BytesMut};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use xlator::*;

impl Posix {
    /// The cached read-write fd of a regular file, by id when known.
    pub(crate) fn data_fd(&self, loc: &Loc) -> io::Result<(Arc<OwnedFd>, FileId)> {
        if let Some(fid) = loc.fid {
            if let Some(fd) = self.fds().get(fid) {
                return Ok((fd, fid));
            }
        }
        let o = self.resolve(loc)?;
        Ok((self.data_fd_of(&o)?, o.fid))
    }

    pub(crate) fn data_fd_of(&self, o: &Obj) -> io::Result<Arc<OwnedFd>> {
        if let Some(fd) = self.fds().get(o.fid) {
            return Ok(fd);
        }
        match kind_of(&o.st) {
            FileKind::File => {}
            FileKind::Dir => return Err(err(libc::EISDIR)),
            _ => return Err(err(libc::EINVAL)),
        }
        let fd = match sys::reopen(raw(&o.fd), libc::O_RDWR) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::ETXTBSY)) => {
                sys::reopen(raw(&o.fd), libc::O_RDONLY)?
            }
            r => r?,
        };
        Ok(self.fds().insert(o.fid, Arc::new(fd)))
    }

    pub fn open(&self, loc: &Loc, flags: i32) -> io::Result<()> {
        let o = self.resolve(loc)?;
        let writing = flags & libc::O_ACCMODE != libc::O_RDONLY;
        match kind_of(&o.st) {
            FileKind::Dir if writing => Err(err(libc::EISDIR)),
            FileKind::File => {
                let fd = self.data_fd_of(&o)?;
                if writing && flags & libc::O_TRUNC != 0 {
                    sys::ftruncate(raw(&fd), 0)?;
                }
                // A release will follow: until then the file outlives its names.
                self.fds().opened(o.fid);
                Ok(())
            }
            FileKind::Symlink => Err(err(libc::ELOOP)),
            // What open(2) of a socket gives on Linux. (The gateway's kernel
            // never asks: it opens special files itself, by their type.)
            FileKind::Socket => Err(err(libc::ENXIO)),
            // Nothing of a fifo or device is opened here: opening a fifo
            // would block a pool thread until a writer came.
            _ => Ok(()),
        }
    }

    pub fn fsync(&self, loc: &Loc, datasync: bool) -> io::Result<()> {
        let o = self.resolve(loc)?;
        if kind_of(&o.st) == FileKind::File {
            let fd = self.data_fd_of(&o)?;
            return sys::fsync(raw(&fd), datasync);
        }
        if kind_of(&o.st) == FileKind::Dir {
            let d = sys::reopen(raw(&o.fd), libc::O_RDONLY | libc::O_DIRECTORY)?;
            return sys::fsync(raw(&d), datasync);
        }
        // A fifo, socket, device or symlink holds no data of ours, and
        // opening a fifo to sync it would block until a writer came: a
        // blocking-pool thread held forever by any client that asks.
        Ok(())
    }

    pub fn read(&self, loc: &Loc, offset: u64, size: u32) -> io::Result<Bytes> {
        if size > MAX_READ {
            return Err(err(libc::EINVAL));
        }
        let (fd, _) = self.data_fd(loc)?;
        let mut buf = BytesMut::with_capacity(size as usize);
        let n = sys::pread_uninit(raw(&fd), &mut buf.spare_capacity_mut()[..size as usize], offset)?;
        // SAFETY: pread_uninit initialised the first n bytes.
        unsafe { buf.set_len(n) };
        Ok(buf.freeze())
    }

    /// The answer says exactly what landed: all of it; a short count when
    /// the disk filled (ENOSPC) or failed (EIO) part-way — the bytes that
    /// landed are the contiguous prefix `[offset, offset + written)`, nothing
    /// beyond; or the error when nothing landed (the file is unchanged: its
    /// size did not grow). Once bytes landed, no later failure turns the
    /// answer into an error.
    ///
    /// It also carries the size and blocks the file had just before: a
    /// striped write whose other pieces failed cuts back what this one
    /// extended (stripe's `write` module), and one that landed tells the
    /// gateway how the file's blocks moved (`WriteReply::attr_after`). One
    /// more fstat per write, a few hundred nanoseconds.
    pub fn write(&self, loc: &Loc, offset: u64, data: &[u8]) -> io::Result<WriteReply> {
        let (fd, fid) = self.data_fd(loc)?;
        let (size_before, blocks_before) = match sys::fstat(raw(&fd)) {
            Ok(st) => (Some(st.st_size as u64), Some(st.st_blocks as u64)),
            Err(e) => {
                tracing::warn!(%fid, "stat before a write failed: {e}");
                (None, None)
            }
        };
        let written = match sys::pwrite_full(raw(&fd), data, offset) {
            // A full disk (a short write, or none): removed files held for
            // gateways' opens on the way give their space back now, and the
            // rest is tried again.
            Ok(n) if n < data.len() && self.fds().release_all_holds() > 0 => {
                n + sys::pwrite_full(raw(&fd), &data[n..], offset + n as u64).unwrap_or(0)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) && self.fds().release_all_holds() > 0 => {
                sys::pwrite_full(raw(&fd), data, offset)?
            }
            r => r?,
        };
        // Files reached through the cache always have their per-fid link.
        let attr = match sys::fstat(raw(&fd)) {
            Ok(st) => Some(super::attr_of(&st, fid, fid != FileId::ROOT)),
            Err(e) => {
                tracing::warn!(%fid, "stat after a write failed: {e}");
                None
            }
        };
        Ok(WriteReply { written: written as u32, attr, size_before, blocks_before })
    }

    /// Entries after `cookie`. Cookies are the file system's own `d_off`
    /// values (stable hashes on ext4/xfs), so continuing a listing of 100,000
    /// entries costs one seek, not a rescan.
    pub fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> io::Result<Vec<DirEntry>> {
        let dir = self.resolve_dir(loc)?;
        let max = max.clamp(1, 100_000) as usize;
        let mut out = Vec::with_capacity(max.min(1024));
        self.each_name(&dir, loc, cookie, |name, off| {
            let o = match self.child(&dir, name) {
                Ok(o) => o,
                // removed while we were listing
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(true),
                Err(e) => return Err(e),
            };
            let attr = self.attr(&o);
            out.push(DirEntry { name: name.to_string(), kind: attr.kind, fid: o.fid, next: off, attr: plus.then_some(attr) });
            Ok(out.len() < max)
        })?;
        Ok(out)
    }

    /// The names [`Posix::readdir`] would list, with the same cookies,
    /// from the directory's own blocks: no entry is opened, so a cold disk
    /// reads no inode.
    pub fn names(&self, loc: &Loc, cookie: u64, max: u32) -> io::Result<Vec<DirName>> {
        let dir = self.resolve_dir(loc)?;
        let max = max.clamp(1, 100_000) as usize;
        let mut out = Vec::with_capacity(max.min(1024));
        self.each_name(&dir, loc, cookie, |name, off| {
            out.push(DirName { name: name.to_string(), next: off });
            Ok(out.len() < max)
        })?;
        Ok(out)
    }

    /// Call `each(name, cookie)` for the names of `dir` after `cookie`
    /// (not "." and "..", nor the export's own meta directory, nor names
    /// that are not UTF-8) until it returns false or the directory ends.
    fn each_name(
        &self,
        dir: &Obj,
        loc: &Loc,
        cookie: u64,
        mut each: impl FnMut(&str, u64) -> io::Result<bool>,
    ) -> io::Result<()> {
        let d = sys::reopen(raw(&dir.fd), libc::O_RDONLY | libc::O_DIRECTORY)?;
        if cookie != 0 {
            sys::lseek(raw(&d), cookie)?;
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = sys::getdents(raw(&d), &mut buf)?;
            if n == 0 {
                return Ok(());
            }
            let mut at = 0;
            while at < n {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let rec = &buf[at..n];
                let off = u64::from_ne_bytes(rec[8..16].try_into().unwrap());
                let reclen = u16::from_ne_bytes(rec[16..18].try_into().unwrap()) as usize;
                let name_bytes = &rec[19..reclen];
                let name_bytes = &name_bytes[..name_bytes.iter().position(|&b| b == 0).unwrap_or(name_bytes.len())];
                at += reclen;
                let Ok(name) = std::str::from_utf8(name_bytes) else {
                    tracing::warn!("skipping a non-UTF-8 name in {:?}", loc.path);
                    continue;
                };
                if name == "." || name == ".." || is_hidden(dir.fid, name) {
                    continue;
                }
                if !each(name, off)? {
                    return Ok(());
                }
            }
        }
    }

    pub fn statfs(&self) -> io::Result<StatFs> {
        let s = sys::fstatvfs(self.root_fd())?;
        Ok(StatFs {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: s.f_namemax as u32,
            frsize: s.f_frsize as u32,
        })
    }
}
