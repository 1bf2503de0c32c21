//! An open file's life through the gateway: which opens bypass the
//! kernel's pages, OPEN (answered at once, sent later: the coherence
//! translator's `opens_in_flight`),
//! WRITE (plain, or an append ordered by the file's ordering server: the
//! coherence translator's `append`),
//! FLUSH (nothing to send unless the closer holds POSIX locks) and RELEASE
//! (its locks, then the servers' open count, in the background).

use super::answer::finish;
use super::first_poll;
use super::fs::GatewayFs;
use bytes::Bytes;
use fuser::*;
use std::sync::atomic::Ordering::Relaxed;
use xlator::Stateful;

impl GatewayFs {
    /// A fresh handle for an open with `flags`; its low bit says whether
    /// it bypasses the kernel's pages ([`GatewayFs::fopen_flags`]).
    pub(super) fn new_fh(&self, flags: i32) -> FileHandle {
        FileHandle(self.next_fh.fetch_add(1, Relaxed) << 1 | u64::from(direct_io(flags)))
    }

    /// The open flags of inode `ino` (None: a create's, decided once
    /// answered): pages are kept across opens of a held inode only (one
    /// not held yet has its attributes, and pages, checked on every read).
    pub(super) fn fopen_flags(&self, ino: Option<INodeNo>, flags: i32) -> FopenFlags {
        let mut f = FopenFlags::empty();
        if self.kc.keep_cache() && ino.is_none_or(|i| self.kc.holds().check(&[i.0])) {
            f |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        if direct_io(flags) {
            f |= FopenFlags::FOPEN_DIRECT_IO;
        }
        f
    }

    pub(super) fn open_file(&self, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let (co, loc, fopen, fh) = (self.co.clone(), self.inodes.loc(ino.0), self.fopen_flags(Some(ino), flags.0), self.new_fh(flags.0));
        if !self.kc.keep_cache() {
            // Without kernel caching, an open is the moment close-to-open
            // consistency is checked: it waits, as it always did.
            return self.answer(reply, async move { co.open(&loc?, flags.0).await }, move |r, ()| r.opened(fh, fopen));
        }
        let loc = match loc {
            Ok(l) => l,
            Err(e) => return finish(reply, Err::<(), _>(e), |_, ()| ()),
        };
        // Nothing the application sees depends on it (see `opens_in_flight`).
        self.co.open_later(&self.rt, fh.0, loc, flags.0);
        reply.opened(fh, fopen);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_file(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        reply: ReplyWrite,
    ) {
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        // fuser reuses its receive buffer: this is the one copy of the payload.
        let data = Bytes::copy_from_slice(data);
        // (A page written back from a shared mapping is no append, whatever
        // the flags of the open file it goes through.)
        let is_append = for_appending(flags.0) && !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let work = async move {
            match is_append {
                false => co.write(&loc?, offset, data).await,
                true => co.append(&loc?, offset, data, is_direct(fh)).await,
            }
        };
        self.answer(reply, work, |r, w| r.written(w.written));
    }

    pub(super) fn flush_file(&self, ino: INodeNo, lock_owner: LockOwner, reply: ReplyEmpty) {
        // Every write reached the servers before it was acknowledged, and
        // nothing below buffers: a close has nothing to send, unless the
        // closing owner holds POSIX locks (a close drops them all).
        if !self.co.locks().involved(ino.0, lock_owner.0) {
            return reply.ok();
        }
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        self.answer(reply, async move { co.locks().flush(co.lower(), &loc?, ino.0, lock_owner.0).await }, |r, ()| r.ok());
    }

    pub(super) fn release_file(&self, ino: INodeNo, fh: FileHandle, lock_owner: Option<LockOwner>, reply: ReplyEmpty) {
        // The application's close does not wait for the servers: a release
        // only lets a server free an unlinked file's space (or put a new
        // file's blocks in the bank), and an unlink that overtakes it leaves
        // the space held until it arrives. It goes with others (`releases`).
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        reply.ok();
        first_poll::run(&self.rt, async move {
            let landed = co.landed(fh.0).await;
            if let Ok(loc) = loc {
                // The open file's OFD and flock locks go with it.
                co.locks().release(co.lower(), &loc, ino.0, fh.0, lock_owner.map(|o| o.0)).await;
                if landed {
                    co.release_later(loc);
                }
            }
        });
    }
}

/// Which opens bypass the kernel's pages.
///
/// - For appending: each write reaches the gateway as the application
///   made it, and the gateway, not the kernel's idea of the size, decides
///   where it lands (see the coherence translator's `appends`). Its pages would be written at the
///   kernel's end otherwise.
/// - Write-only: the pages a cached write fills would never be read. The
///   write moves the file's mtime past the one the kernel holds, and the
///   next attributes it fetches (at once, by a read; or by a LOOKUP once
///   the TTL ran out: a `stat` after an untar) make `FUSE_AUTO_INVAL_DATA`
///   drop them again. Direct writes skip filling and dropping them, and
///   one copy. (A reader of the file through this kernel is served from
///   the gateway's memo, or the bank, as after any write.)
fn direct_io(open_flags: i32) -> bool {
    for_appending(open_flags) || open_flags & libc::O_ACCMODE == libc::O_WRONLY
}

fn for_appending(open_flags: i32) -> bool {
    open_flags & libc::O_APPEND != 0
}

/// Whether handle `fh` was opened with direct I/O ([`GatewayFs::new_fh`]).
fn is_direct(fh: FileHandle) -> bool {
    fh.0 & 1 == 1
}
