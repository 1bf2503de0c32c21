//! File ids on this server: one id, one object.
//!
//! Ids are chosen by the gateway (stripe creates on server 0 and then on the
//! others with the same id, so a server cannot pick its own), and the id is
//! what data calls, the fd cache and every cache key are found by. So a
//! server must never let a new object take an id it already holds: a raw
//! create carrying another file's id would otherwise re-point that id (the
//! per-fid link used to be replaced by "the new file wins") and serve the
//! attacker's bytes to whoever reads the victim by id.
//!
//! THE RULE: a create, mkdir, mknod or symlink is refused with EEXIST, and
//! nothing is created, when its id is already in use on this server, that
//! is when
//!
//! - it is the root's id, or
//! - a per-fid link `.imca/fids/ab/<fid>` exists (a file, symlink or special
//!   file that has a name, or the leftover of an interrupted unlink), or
//! - a directory marker `.imca/fids/ab/<fid>.dir` exists (directories cannot
//!   be hard-linked, so each gets an empty marker file, claimed with
//!   `O_EXCL` before the directory is made and removed by rmdir), or
//! - the fd cache holds the id (an unlinked file still open).
//!
//! The check and the claim (the link, or the marker made with `O_EXCL`)
//! happen under a lock for that id (one of [`ID_LOCKS`], picked by the id),
//! so of creates racing with one id exactly one makes an object; the
//! atomic claim stays as the backstop.
//!
//! An id that is not the shape gateways make (`FileId::from_random`: top bit
//! set) is refused with EINVAL, so no client can name the root or the ids
//! posix derives from inode numbers.
//!
//! Why stripe keeps working: on servers 1..S-1 the id server 0 decided is new
//! (every gateway draws a fresh random id per create), so the create goes
//! through. The cases where it is not new:
//!
//! - a non-exclusive create whose name already exists there (a racing
//!   gateway, or a file both servers have): that name is opened as before,
//!   whatever id the call carries — nothing new takes the id;
//! - a create retried after stripe rolled a partial one back: the rollback
//!   (unlink/rmdir) removed the link or marker, so the id is free again;
//! - servers that disagree (a half-done rename left the id under another
//!   name): EEXIST, and stripe rolls the create back instead of letting
//!   the id point at two objects.
//!
//! A link names the same object again and never carries an id, so it cannot
//! alias one; a file with no name left cannot be linked (ENOENT).

use crate::sys::{self, err, raw};
use crate::Posix;
use std::io;
use std::os::fd::RawFd;
use std::sync::{Mutex, MutexGuard};
use xlator::{Attr, FileId};

/// How many locks the ids are spread over (creates with different ids
/// almost never wait for each other).
pub const ID_LOCKS: usize = 256;

/// Locks held from "is this id free?" to "it is ours" during a create.
pub(crate) struct IdLocks([Mutex<()>; ID_LOCKS]);

impl Default for IdLocks {
    fn default() -> Self {
        IdLocks(std::array::from_fn(|_| Mutex::new(())))
    }
}

/// `.imca/fids/ab/<32 hex>` relative to the fids dir.
pub(crate) fn fid_link(fid: FileId) -> String {
    let h = fid.to_hex();
    format!("{}/{}", &h[30..32], h)
}

/// A directory's marker, next to where a file's link would be.
pub(crate) fn dir_marker(fid: FileId) -> String {
    format!("{}.dir", fid_link(fid))
}

/// Whether `fid` looks like an id a gateway draws (see the module docs).
pub(crate) fn is_client_id(fid: FileId) -> bool {
    fid.0 >> 127 == 1
}

impl Posix {
    /// Hold this while checking and claiming `fid` (a blocking-pool thread
    /// holds it across the create's few syscalls).
    pub(crate) fn lock_id(&self, fid: FileId) -> MutexGuard<'_, ()> {
        let m = &self.id_locks.0[(fid.0 % ID_LOCKS as u128) as usize];
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The id locks of two objects (a rename moving or swapping
    /// directories), taken in a fixed order; one lock when they share it.
    pub(crate) fn lock_ids(&self, a: FileId, b: Option<FileId>) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        let slot = |f: FileId| (f.0 % ID_LOCKS as u128) as usize;
        match b {
            Some(b) if slot(b) != slot(a) => {
                let (lo, hi) = if slot(a) < slot(b) { (a, b) } else { (b, a) };
                let first = self.lock_id(lo);
                (first, Some(self.lock_id(hi)))
            }
            _ => (self.lock_id(a), None),
        }
    }

    /// The create lock of `name` in `dir`: held by a create (mkdir, mknod,
    /// symlink) from before the name exists until its id is stamped on it.
    /// Taken before any id lock.
    pub(crate) fn lock_name(&self, dir: &crate::Obj, name: &str) -> MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (dir.st.st_dev, dir.st.st_ino, name).hash(&mut h);
        let m = &self.name_locks.0[(h.finish() % ID_LOCKS as u64) as usize];
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// EINVAL for an id no gateway makes, EEXIST for one in use here.
    pub(crate) fn check_new_fid(&self, fid: FileId) -> io::Result<()> {
        if !is_client_id(fid) {
            return Err(err(libc::EINVAL));
        }
        if self.fid_in_use(fid)? {
            tracing::debug!(%fid, "refused: a create names an id this server already holds");
            return Err(err(libc::EEXIST));
        }
        Ok(())
    }

    pub(crate) fn fid_in_use(&self, fid: FileId) -> io::Result<bool> {
        if fid == FileId::ROOT || self.fds().contains(fid) {
            return Ok(true);
        }
        Ok(self.fids_entry_exists(&fid_link(fid))? || self.fids_entry_exists(&dir_marker(fid))?)
    }

    fn fids_entry_exists(&self, name: &str) -> io::Result<bool> {
        match sys::fstatat(raw(&self.fids), name) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Take a directory's id before the directory is made (its marker,
    /// made with `O_EXCL`: EEXIST if it is there), recording where it will
    /// be when that is known (see [`crate::dirs`]; best effort).
    pub(crate) fn claim_dir_fid(&self, fid: FileId, place: Option<&crate::places::Place>) -> io::Result<()> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let marker = sys::openat(raw(&self.fids), &dir_marker(fid), flags, 0o600)?;
        if let Some(p) = place {
            if let Err(e) = sys::fsetxattr(raw(&marker), crate::places::PLACE_XATTR, &crate::places::encode(std::slice::from_ref(p))) {
                tracing::warn!(%fid, "cannot record where a new directory is: {e}");
            }
        }
        Ok(())
    }

    /// A directory is gone (or was never made): its id is free again.
    pub(crate) fn free_dir_fid(&self, fid: FileId) {
        match sys::unlinkat(raw(&self.fids), &dir_marker(fid), 0) {
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                tracing::warn!(%fid, "cannot remove a directory's id marker: {e}");
            }
            _ => {}
        }
    }

    /// Add the per-fid hard link of a non-directory. EEXIST when the id is
    /// taken: a link is never replaced, whatever it points at.
    pub(crate) fn link_fid(&self, fd: RawFd, fid: FileId) -> io::Result<()> {
        sys::link_fd(fd, raw(&self.fids), &fid_link(fid))
    }

    /// Drop the per-fid link once only it is left (the file is gone).
    pub(crate) fn unlink_fid_if_last(&self, fid: FileId) -> io::Result<Option<Attr>> {
        let fd = match sys::openat(raw(&self.fids), &fid_link(fid), libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        let st = sys::fstat(raw(&fd))?;
        if st.st_nlink <= 1 {
            sys::unlinkat(raw(&self.fids), &fid_link(fid), 0)?;
            Ok(None)
        } else {
            Ok(Some(crate::attr_of(&st, fid, true)))
        }
    }
}
