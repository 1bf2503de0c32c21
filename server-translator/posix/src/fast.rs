//! Fast paths that run on the async thread, skipping the hop to the
//! blocking pool (two thread wake-ups, most of a small op's latency), when
//! the kernel can answer from memory: reads served by `preadv2(RWF_NOWAIT)`
//! from the page cache, and lookups/stats whose path is in the dentry cache
//! (`openat2(RESOLVE_CACHED)`) or whose directory is in the table of
//! directory fds (`dirs`). Anything else returns `None` and the caller
//! takes the ordinary blocking path, which gives the authoritative answer
//! and errno.

use super::sys::{self, raw};
use super::{fid_link, kind_of, read_fid, Obj, Posix, MAX_READ};
use xlator::names::{check_name, check_path, is_hidden};
use bytes::{Bytes, BytesMut};
use std::io;
use xlator::*;

impl Posix {
    /// A read of a file whose fd is cached and whose pages are in memory.
    pub fn read_fast(&self, loc: &Loc, offset: u64, size: u32) -> Option<io::Result<Bytes>> {
        if size > MAX_READ || !self.fast {
            return None;
        }
        let fd = self.fds().get(loc.fid?)?;
        let mut buf = BytesMut::with_capacity(size as usize);
        match sys::pread_nowait(raw(&fd), &mut buf.spare_capacity_mut()[..size as usize], offset) {
            Ok(Some(n)) => {
                // SAFETY: the first n bytes were written by the kernel.
                unsafe { buf.set_len(n) };
                self.hit();
                Some(Ok(buf.freeze()))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// getattr from the dentry/inode caches only.
    pub fn getattr_fast(&self, loc: &Loc) -> Option<io::Result<Attr>> {
        let o = self.resolve_cached(loc)?;
        self.hit();
        Some(Ok(self.attr(&o)))
    }

    /// lookup from the dentry/inode caches only. A cached negative entry is
    /// an authoritative ENOENT.
    pub fn lookup_fast(&self, parent: &Loc, name: &str) -> Option<io::Result<Attr>> {
        check_name(name).ok()?;
        let dir = self.resolve_cached(parent)?;
        if kind_of(&dir.st) != FileKind::Dir || is_hidden(dir.fid, name) {
            return None;
        }
        let r = match sys::open_beneath_cached(raw(&dir.fd), name, libc::O_PATH | libc::O_NOFOLLOW) {
            Ok(fd) => {
                let o = self.obj_cached(fd)?;
                if kind_of(&o.st) == FileKind::Dir {
                    self.remember_dir(o.fid, &o.fd);
                }
                Ok(self.attr(&o))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(e),
            Err(_) => return None,
        };
        self.hit();
        Some(r)
    }

    fn hit(&self) {
        self.fast_hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn resolve_cached(&self, loc: &Loc) -> Option<Obj> {
        if !self.fast {
            return None;
        }
        check_path(&loc.path).ok()?;
        if loc.fid == Some(FileId::ROOT) || (loc.path.is_empty() && loc.fid.is_none()) {
            let fd = sys::open_beneath_cached(self.root_fd(), "", libc::O_PATH | libc::O_DIRECTORY).ok()?;
            let st = sys::fstat(raw(&fd)).ok()?;
            return Some(Obj { fd, st, fid: FileId::ROOT, linked: false });
        }
        if let Some(fid) = loc.fid {
            // Directories are found in the table of directory fds, files
            // through their per-fid link; misses go on by path (if short
            // enough for one syscall), checked against the id.
            if let Some(o) = self.cached_dir_obj(fid) {
                return Some(o);
            }
            if let Ok(fd) = sys::open_beneath_cached(raw(&self.fids), &fid_link(fid), libc::O_PATH | libc::O_NOFOLLOW) {
                let st = sys::fstat(raw(&fd)).ok()?;
                return Some(Obj { fd, st, fid, linked: true });
            }
        }
        if loc.path.is_empty() || loc.path.len() >= libc::PATH_MAX as usize {
            return None;
        }
        let fd = sys::open_beneath_cached(self.root_fd(), &loc.path, libc::O_PATH | libc::O_NOFOLLOW).ok()?;
        let o = self.obj_cached(fd)?;
        match loc.fid {
            // (A directory found here with the id asked for is the one: its
            // id is on it. The slow path, which walks records, is for what
            // the dentry cache cannot answer: long or stale paths.)
            Some(want) if want != o.fid => None,
            _ => Some(o),
        }
    }

    /// Like `obj`, but gives up (rather than assigning) when the id is missing.
    fn obj_cached(&self, fd: std::os::fd::OwnedFd) -> Option<Obj> {
        let st = sys::fstat(raw(&fd)).ok()?;
        let kind = kind_of(&st);
        let fid = read_fid(raw(&fd), kind).ok()??;
        Some(Obj { fd, st, fid, linked: kind != FileKind::Dir && fid != FileId::ROOT })
    }
}
