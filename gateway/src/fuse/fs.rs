//! The fuser `Filesystem`: kernel requests in, calls on the client graph's
//! top (the coherence translator) out.
//!
//! Several fuser threads (one cloned /dev/fuse fd each) read requests, one at
//! a time unless requests queue (`readers`); every request runs on its
//! thread until it first waits (`first_poll`), then as a task on the tokio
//! runtime that owns its reply and answers when the graph does, so one
//! slow read never holds up others. A re-validation the memo can answer
//! (LOOKUP, GETATTR, a small file's READ) is answered on the fuser thread
//! from the coherence translator's synchronous API, without a graph call.
//!
//! The handlers of an open file's life are in `open_file_handlers`, those
//! of extended attributes in `xattrs`; this file keeps the names and
//! attributes, and the one `Filesystem` impl that dispatches them all.

use super::answer::{answer, finish, Answer};
use super::convert;
use super::dir_streams::DirStreams;
use super::first_poll;
use super::listing;
use super::readers::Readers;
use coherence::{Coherence, Inodes, KernelCache};
use fuser::*;
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::SystemTime;
use xlator::{Attr, FileId, FsError, FsResult, Loc, NewFile, Owner, SetAttr, Stateful, TimeSet};

/// FUSE requests up to this size (read and write).
pub const MAX_REQUEST: u32 = 1 << 20;

pub struct GatewayFs {
    pub(super) rt: tokio::runtime::Handle,
    /// the top of the client graph: what a request the memo cannot answer becomes a call on
    pub(super) co: Arc<Coherence>,
    /// what the kernel may cache, for how long, and the memo (the coherence translator's)
    pub(super) kc: Arc<KernelCache>,
    pub(super) inodes: Arc<Inodes>,
    dirs: Arc<DirStreams>,
    /// a fresh handle per open: OFD locks are dropped by the open file's release
    pub(super) next_fh: AtomicU64,
    /// how many fuser threads wait on the device (see `readers`)
    readers: Arc<Readers>,
    /// pass `security.selinux` through (see `xattrs`)
    pub(super) selinux: bool,
}

impl GatewayFs {
    pub fn new(rt: tokio::runtime::Handle, co: Arc<Coherence>) -> GatewayFs {
        GatewayFs {
            rt,
            kc: co.kernel().clone(),
            inodes: co.inodes().clone(),
            co,
            dirs: Arc::default(),
            next_fh: AtomicU64::new(1),
            readers: Arc::new(Readers::new(1)),
            selinux: false,
        }
    }

    /// Share `readers` with the session that runs this file system.
    pub fn with_readers(mut self, readers: Arc<Readers>) -> GatewayFs {
        self.readers = readers;
        self
    }

    /// Pass the storage hosts' SELinux labels through (see `xattrs`).
    pub fn selinux(mut self, on: bool) -> GatewayFs {
        self.selinux = on;
        self
    }

    /// Run `work` on the runtime; answer `reply` with `ok` or the errno.
    pub(super) fn answer<R: Answer, T: Send + 'static>(
        &self,
        reply: R,
        work: impl Future<Output = FsResult<T>> + Send + 'static,
        ok: impl FnOnce(R, T) + Send + 'static,
    ) {
        answer(&self.rt, reply, work, ok)
    }

    /// Answer a request that names an entry (lookup, create, mkdir, mknod,
    /// symlink, link): `call` asks the graph with (parent, name, extra
    /// arguments), then the inode table learns the name (the kernel holds
    /// one more reference), and the reply gets the TTL of a ticket taken
    /// before the call.
    fn entry<A, F>(
        &self,
        reply: ReplyEntry,
        parent: INodeNo,
        args: FsResult<(Loc, String, A)>,
        call: impl FnOnce(Arc<Coherence>, Loc, String, A) -> F + Send + 'static,
    ) where
        A: Send + 'static,
        F: Future<Output = FsResult<Attr>> + Send + 'static,
    {
        let (co, inodes, kc, t) = (self.co.clone(), self.inodes.clone(), self.kc.clone(), self.kc.ticket());
        let work = async move {
            let (ploc, name, extra) = args?;
            let attr = call(co, ploc.clone(), name.clone(), extra).await?;
            inodes.remember(parent.0, &ploc, &name, attr.fid);
            Ok(attr)
        };
        self.answer(reply, work, move |r, a| r.entry(&kc.ttl(t, &[parent.0, a.fid.ino()]), &convert::attr(&a), Generation(0)));
    }

    /// Answer a request that changes nothing the kernel is handed back
    /// (unlink, rmdir, fsync, …) with the graph's call `work`.
    fn empty<T: Send + 'static>(&self, reply: ReplyEmpty, work: impl Future<Output = FsResult<T>> + Send + 'static) {
        self.answer(reply, work, |r, _| r.ok());
    }
}

fn owner(req: &Request) -> Owner {
    Owner { uid: req.uid(), gid: req.gid() }
}

fn new_file(name: &str, perm: u32, owner: Owner, exclusive: bool) -> NewFile {
    NewFile { name: name.to_string(), fid: FileId::from_random(rand::random()), perm: perm & 0o7777, owner, exclusive }
}

fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::At(convert::timestamp(t)),
    }
}

/// Parent location and checked child name, or the errno to answer.
fn parent_and_name<'a>(inodes: &Inodes, parent: INodeNo, name: &'a OsStr) -> FsResult<(Loc, &'a str)> {
    let n = convert::name(name)?;
    Ok((inodes.loc(parent.0)?, n))
}

impl Filesystem for GatewayFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_REQUEST);
        // As much readahead as the kernel allows (it offers its maximum).
        if let Err(max) = config.set_max_readahead(MAX_REQUEST) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        // Lookups and listings in one directory may run in parallel.
        // Cached pages are checked against size/mtime whenever the
        // attributes are fetched again: with TTL 0 on every read; with
        // leases when one ran out (callbacks drop them otherwise).
        let mut wanted = InitFlags::FUSE_PARALLEL_DIROPS | InitFlags::FUSE_AUTO_INVAL_DATA;
        // A file opened for appending (direct I/O) can still be mapped
        // shared, through the page cache, as any other.
        wanted |= InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP;
        // fcntl/lockf/OFD and flock locks come to us (and go to the file's
        // ordering server), so they hold across gateways.
        wanted |= InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS;
        if self.kc.keep_cache() {
            // Listings bring the attributes along when the kernel sees them
            // used (`ls -l`, a scan that stats each file): they are cached
            // as a LOOKUP's would be.
            wanted |= InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO;
        }
        for flag in wanted.iter() {
            if config.add_capabilities(flag).is_err() {
                tracing::info!(?flag, "kernel lacks FUSE capability");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _turn = self.readers.enter();
        if let Ok(n) = convert::name(name) {
            // A re-validation of what was answered before (see `memo`);
            // remembered before its TTL is computed (an entry callback
            // meanwhile then reaches the kernel, or makes the TTL 0).
            let t = self.kc.ticket();
            if let Some((a, _)) = self.kc.memo_entry(parent.0, n) {
                if self.inodes.remember_under(parent.0, n, a.fid).is_ok() {
                    let ttl = self.kc.ttl(t, &[parent.0, a.fid.ino()]);
                    return reply.entry(&ttl, &convert::attr(&a), Generation(0));
                }
            }
            // The lookup before every create in a directory made here.
            if self.kc.memo_absent(parent.0, n) {
                return reply.error(Errno::ENOENT);
            }
        }
        // Not remembered: the coherence translator may list ahead, wait
        // for holds under way, or ask the servers.
        let args = parent_and_name(&self.inodes, parent, name).map(|(p, n)| (p, n.to_string(), ()));
        self.entry(reply, parent, args, |co, p, n, ()| async move { co.lookup(&p, &n).await });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if self.inodes.forget(ino.0, nlookup) {
            self.kc.forgotten(ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _turn = self.readers.enter();
        if let Some((a, ttl)) = self.kc.memo_attr(ino.0) {
            return reply.attr(&ttl, &convert::attr(&a));
        }
        let (co, kc, t, loc) = (self.co.clone(), self.kc.clone(), self.kc.ticket(), self.inodes.loc(ino.0));
        self.answer(reply, async move { co.getattr(&loc?).await }, move |r, a| r.attr(&kc.ttl(t, &[ino.0]), &convert::attr(&a)));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let _turn = self.readers.enter();
        let (co, kc, t, loc) = (self.co.clone(), self.kc.clone(), self.kc.ticket(), self.inodes.loc(ino.0));
        let set = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time_set),
            mtime: mtime.map(time_set),
        };
        self.answer(reply, async move { co.setattr(&loc?, &set).await }, move |r, a| r.attr(&kc.ttl(t, &[ino.0]), &convert::attr(&a)));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _turn = self.readers.enter();
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.answer(reply, async move { co.readlink(&loc?).await }, |r, t| r.data(t.as_bytes()));
    }

    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let _turn = self.readers.enter();
        let args = parent_and_name(&self.inodes, parent, name)
            .map(|(p, n)| (p, n.to_string(), new_file(n, mode & !umask, owner(req), true)));
        self.entry(reply, parent, args, move |co, p, _, new| async move { co.mknod(&p, &new, mode, rdev).await.map(|m| m.attr) });
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let _turn = self.readers.enter();
        let args = parent_and_name(&self.inodes, parent, name)
            .map(|(p, n)| (p, n.to_string(), new_file(n, mode & !umask, owner(req), true)));
        self.entry(reply, parent, args, |co, p, _, new| async move { co.mkdir(&p, &new).await.map(|m| m.attr) });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        let (co, inodes) = (self.co.clone(), self.inodes.clone());
        let args = parent_and_name(&self.inodes, parent, name).map(|(p, n)| (p, n.to_string()));
        self.empty(reply, async move {
            let (p, n) = args?;
            co.unlink(&p, &n).await?;
            inodes.entry_dropped(parent.0, &n);
            Ok(())
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        let (co, inodes) = (self.co.clone(), self.inodes.clone());
        let args = parent_and_name(&self.inodes, parent, name).map(|(p, n)| (p, n.to_string()));
        self.empty(reply, async move {
            let (p, n) = args?;
            co.rmdir(&p, &n).await?;
            inodes.entry_dropped(parent.0, &n);
            Ok(())
        });
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let _turn = self.readers.enter();
        let args = parent_and_name(&self.inodes, parent, link_name).and_then(|(p, n)| {
            let target = target.to_str().ok_or(FsError::EILSEQ)?.to_string();
            Ok((p, n.to_string(), (new_file(n, 0o777, owner(req), true), target)))
        });
        self.entry(reply, parent, args, |co, p, _, (new, target)| async move { co.symlink(&p, &new, &target).await.map(|m| m.attr) });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let _turn = self.readers.enter();
        let (co, inodes) = (self.co.clone(), self.inodes.clone());
        let args = (|| {
            if flags.contains(RenameFlags::RENAME_WHITEOUT) {
                return Err(FsError::EINVAL);
            }
            let (p, n) = parent_and_name(&inodes, parent, name)?;
            let (np, nn) = parent_and_name(&inodes, newparent, newname)?;
            Ok((p, n.to_string(), np, nn.to_string()))
        })();
        let rflags = xlator::RenameFlags {
            noreplace: flags.contains(RenameFlags::RENAME_NOREPLACE),
            exchange: flags.contains(RenameFlags::RENAME_EXCHANGE),
        };
        let work = async move {
            let (p, n, np, nn) = args?;
            co.rename(&p, &n, &np, &nn, rflags).await?;
            inodes.entry_moved(parent.0, &n, newparent.0, &nn, rflags.exchange);
            let (from, to) = (p.child(&n).path, np.child(&nn).path);
            if rflags.exchange {
                inodes.exchanged(&from, &to);
            } else {
                inodes.renamed(&from, &to);
            }
            Ok(())
        };
        self.answer(reply, work, |r, ()| r.ok());
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let _turn = self.readers.enter();
        let args = self
            .inodes
            .loc(ino.0)
            .and_then(|l| parent_and_name(&self.inodes, newparent, newname).map(|(p, n)| (p, n.to_string(), l)));
        self.entry(reply, newparent, args, |co, np, nn, loc| async move { co.link(&loc, &np, &nn).await.map(|m| m.attr) });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.readers.enter();
        self.open_file(ino, flags, reply)
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _turn = self.readers.enter();
        if let Some(d) = self.kc.memo_read(ino.0, offset, size) {
            return reply.data(&d);
        }
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.answer(reply, async move { co.read(&loc?, offset, size).await }, |r, d| r.data(&d));
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let _turn = self.readers.enter();
        self.write_file(ino, fh, offset, data, write_flags, flags, reply)
    }

    fn flush(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        self.flush_file(ino, lock_owner, reply)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.readers.enter();
        self.release_file(ino, fh, lock_owner, reply)
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.empty(reply, async move { co.fsync(&loc?, datasync).await });
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        self.fallocate_file(ino, offset, length, mode, reply)
    }

    /// Made by the storage servers (stripe's `copy_range`). The kernel
    /// drops its own pages of the copied range and the destination's
    /// attributes once answered; EOPNOTSUPP makes it copy by reads and
    /// writes instead (only ENOSYS would stop it asking).
    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let _turn = self.readers.enter();
        let (co, src, dst) = (self.co.clone(), self.inodes.loc(ino_in.0), self.inodes.loc(ino_out.0));
        let span = xlator::CopySpan { src: offset_in, dst: offset_out, len };
        self.answer(reply, async move { co.copy_range(&src?, &dst?, &[span]).await }, |r, w| r.written(w.written));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _turn = self.readers.enter();
        let opened = self.inodes.loc(ino.0).map(|_| self.dirs.open());
        finish(reply, opened, |r, fh| r.opened(FileHandle(fh), FopenFlags::empty()));
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectory) {
        let _turn = self.readers.enter();
        let (co, loc, stream) = (self.co.clone(), self.inodes.loc(ino.0), self.dirs.get(fh.0));
        first_poll::run(&self.rt, listing::readdir(co, loc, stream, ino, offset, reply));
    }

    fn readdirplus(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, reply: ReplyDirectoryPlus) {
        let _turn = self.readers.enter();
        let (co, loc, stream) = (self.co.clone(), self.inodes.loc(ino.0), self.dirs.get(fh.0));
        first_poll::run(&self.rt, listing::readdirplus(co, loc, stream, ino, offset, reply));
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        self.dirs.close(fh.0);
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        reply.ok();
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let _turn = self.readers.enter();
        // No ioctl means anything on an IMCa file. Every `isatty` asks one
        // (TCGETS: each Python `open`, for one): answered as a file on a
        // local disk answers it, and without fuser's default warning, a
        // log record per call (142,000 lines over a benchmark's files).
        reply.error(Errno::ENOTTY);
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let _turn = self.readers.enter();
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.answer(reply, async move { co.statfs(&loc?).await }, |r, s| {
            r.statfs(s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize)
        });
    }

    fn setxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, _position: u32, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        self.set_xattr(ino, name, value, flags, reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let _turn = self.readers.enter();
        self.get_xattr(ino, name, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let _turn = self.readers.enter();
        self.list_xattrs(ino, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        self.remove_xattr(ino, name, reply)
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _turn = self.readers.enter();
        // Permission checks are the kernel's (default_permissions).
        reply.ok();
    }

    fn create(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, flags: i32, reply: ReplyCreate) {
        let _turn = self.readers.enter();
        let (co, inodes, fopen, fh) = (self.co.clone(), self.inodes.clone(), self.fopen_flags(None, flags), self.new_fh(flags));
        let (kc, t) = (self.kc.clone(), self.kc.ticket());
        let args = parent_and_name(&inodes, parent, name)
            .map(|(p, n)| (p, new_file(n, mode & !umask, owner(req), flags & libc::O_EXCL != 0)));
        let work = async move {
            let (ploc, new) = args?;
            let attr = co.create(&ploc, &new, flags).await?.attr;
            inodes.remember(parent.0, &ploc, &new.name, attr.fid);
            Ok(attr)
        };
        self.answer(reply, work, move |r, a| {
            let ttl = kc.ttl(t, &[parent.0, a.fid.ino()]);
            // an existing file the create opened, not yet held: its pages
            // are checked on every read (TTL 0), and not kept from before
            let fopen = if kc.holds().held(a.fid.ino()) { fopen } else { fopen - FopenFlags::FOPEN_KEEP_CACHE };
            r.created(&ttl, &convert::attr(&a), Generation(0), fh, fopen)
        });
    }

    fn getlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let _turn = self.readers.enter();
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        let work = async move {
            let lock = coherence::lock_request(lock_owner.0, start, end, coherence::lock_type(typ)?, pid);
            co.locks().getlk(co.lower(), &loc?, ino.0, lock).await
        };
        self.answer(reply, work, |r, l| r.locked(l.start, l.end, coherence::fcntl_type(l.typ), l.pid));
    }

    fn setlk(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let _turn = self.readers.enter();
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.empty(reply, async move {
            let lock = coherence::lock_request(lock_owner.0, start, end, coherence::lock_type(typ)?, pid);
            co.locks().setlk(co.lower(), &loc?, ino.0, fh.0, lock, sleep).await
        });
    }
}
