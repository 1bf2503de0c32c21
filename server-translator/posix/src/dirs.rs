//! Directories by id: a directory is found from its file id alone, never
//! by rebuilding its path from the export root, so neither depth nor total
//! path length is limited (Linux limits the path of one syscall, PATH_MAX,
//! not a tree).
//!
//! Files are found through their per-fid hard link; directories cannot be
//! hard-linked, but each already has a marker `.imca/fids/ab/<fid>.dir`
//! (the claim of its id, see [`crate::ids`]). The marker records where the
//! directory is, in its xattr `user.imca.parent`: its parent's id and its
//! name there (`places.rs`). Finding a directory by id:
//!
//! ```text
//!  id ──> table of O_PATH fds (DirFds) ─hit─> done (an O_PATH fd follows renames)
//!   │miss
//!   └──> climb the markers: id → (parent, name) → parent's (parent, name) …
//!        until the root or a directory in the table, then go down again
//!        with openat(name, O_PATH|O_NOFOLLOW|O_DIRECTORY), reading the id
//!        xattr at each step: a step whose id differs is not taken.
//! ```
//!
//! Kept up to date under the directory's id lock: mkdir writes the record
//! with the marker; a rename of a directory first records both places, the
//! new one first (`new\0old`), then renames, and puts back the old record
//! if the rename failed. So a crash between the two steps, or a walk racing
//! with the rename, still finds the directory under one of them; the walk
//! is retried once. A record that no longer matches (a directory moved
//! behind IMCa's back, an export made before records existed) is a miss:
//! the caller then goes by the path the gateway sent, checked against the
//! id, and writes the record found ([`Posix::record_place`]). What the
//! walk returns always carries the id asked for: a stale or forged record
//! yields ENOENT, never another directory.
//!
//! Bounds: a walk climbs at most [`MAX_CLIMB`] levels (a cycle of records
//! is caught before that) and tries other recorded places at most
//! [`MAX_DETOURS`] deep, so no record can make it loop or hold unbounded
//! memory.

use crate::ids::dir_marker;
use crate::sys::{self, err, raw, Stat};
use crate::places::{decode, encode, Place, PLACE_XATTR};
use crate::{read_fid, Obj, Posix};
use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use xlator::{FileId, FileKind};

/// Levels one walk may climb (deeper trees: the gateway's path still works).
pub const MAX_CLIMB: usize = 65_536;
/// How deep a walk may go into a directory's other recorded place.
const MAX_DETOURS: u32 = 4;
fn not_there(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP) | Some(libc::ESTALE))
}

impl Posix {
    /// The directory with id `fid`, found by id; `None` when it cannot be
    /// (no such directory here, or no usable record: try the path).
    pub(crate) fn dir_by_id(&self, fid: FileId) -> io::Result<Option<OwnedFd>> {
        // Twice: a walk that raced with a rename of one of the directories
        // on its way reads the records again (the rename recorded both places).
        for _ in 0..2 {
            match self.find_dir(fid, 0) {
                Ok(fd) => return Ok(Some(fd.try_clone()?)),
                // no record of `fid` at all: nothing to read again
                Err(e) if e.raw_os_error() == Some(libc::ENODATA) => break,
                Err(e) if not_there(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The directory `fid` from the table, while it still exists (no disk
    /// access: the fast paths use it too).
    pub(crate) fn cached_dir_obj(&self, fid: FileId) -> Option<Obj> {
        let (fd, st) = self.cached_dir(fid)?;
        Some(Obj { fd: fd.try_clone().ok()?, st, fid, linked: false })
    }

    fn cached_dir(&self, fid: FileId) -> Option<(Arc<OwnedFd>, Stat)> {
        let fd = self.dir_fds.get(fid)?;
        match sys::fstat(raw(&fd)) {
            Ok(st) if st.st_nlink > 0 => Some((fd, st)),
            _ => {
                self.dir_fds.remove(fid);
                None
            }
        }
    }

    /// Remember a directory whose id was just read off it (a lookup, a
    /// mkdir, a walk): later requests for it by id need no walk.
    pub(crate) fn remember_dir(&self, fid: FileId, fd: &OwnedFd) {
        if let Ok(fd) = fd.try_clone() {
            self.dir_fds.insert(fid, Arc::new(fd));
        }
    }

    /// A directory is gone: its fd leaves the table.
    pub(crate) fn forget_dir(&self, fid: FileId) {
        self.dir_fds.remove(fid);
    }

    fn find_dir(&self, fid: FileId, detours: u32) -> io::Result<Arc<OwnedFd>> {
        // Up: from `fid` through recorded parents to a directory at hand.
        let mut chain: Vec<(FileId, Vec<Place>)> = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = fid;
        let base = loop {
            if cur == FileId::ROOT {
                break self.root_dir.clone();
            }
            if let Some((fd, _)) = self.cached_dir(cur) {
                break fd;
            }
            if chain.len() >= MAX_CLIMB || !seen.insert(cur) {
                // Too deep to climb, or a cycle (only a torn or forged record makes one).
                return Err(err(libc::ENOENT));
            }
            let places = self.read_places(cur)?;
            let Some(first) = places.first() else {
                return Err(err(if chain.is_empty() { libc::ENODATA } else { libc::ENOENT }));
            };
            let up = first.parent;
            chain.push((cur, places));
            cur = up;
        };
        // Down: by name, checking each directory's id.
        let mut at = base;
        for (id, places) in chain.into_iter().rev() {
            let fd = match self.open_verified(&at, &places[0], id) {
                Ok(fd) => fd,
                Err(e) if not_there(&e) && places.len() > 1 && detours < MAX_DETOURS => {
                    self.by_other_place(id, &places[1..], detours + 1)?
                }
                Err(e) => return Err(e),
            };
            at = Arc::new(fd);
            self.dir_fds.insert(id, at.clone());
        }
        Ok(at)
    }

    /// The directory `fid` under a place other than its first (a rename in
    /// progress or interrupted); the place that holds it becomes its record.
    fn by_other_place(&self, fid: FileId, places: &[Place], detours: u32) -> io::Result<OwnedFd> {
        for p in places {
            let Ok(parent) = self.find_dir(p.parent, detours) else { continue };
            if let Ok(fd) = self.open_verified(&parent, p, fid) {
                self.record_place(fid, &parent, &p.name);
                return Ok(fd);
            }
        }
        Err(err(libc::ENOENT))
    }

    /// `place.name` in `parent` if it is the directory `fid`, else ENOENT.
    fn open_verified(&self, parent: &OwnedFd, place: &Place, fid: FileId) -> io::Result<OwnedFd> {
        let fd = sys::openat(raw(parent), &place.name, libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY, 0)?;
        match read_fid(raw(&fd), FileKind::Dir)? {
            Some(found) if found == fid => Ok(fd),
            _ => Err(err(libc::ENOENT)),
        }
    }

    /// The places recorded in `fid`'s marker (empty: none, or no marker).
    fn read_places(&self, fid: FileId) -> io::Result<Vec<Place>> {
        let marker = match sys::openat(raw(&self.fids), &dir_marker(fid), libc::O_RDONLY | libc::O_NOFOLLOW, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut buf = [0u8; 2 * (32 + 1 + 255) + 1];
        match sys::fgetxattr(raw(&marker), PLACE_XATTR, &mut buf) {
            Ok(n) => Ok(decode(&buf[..n])),
            // no record (an export from before records) or an odd one
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA) | Some(libc::ERANGE) | Some(libc::ENOTSUP)) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Record `fid`'s places in its marker. Best effort: a directory
    /// without a record is still found by path. A missing marker is not
    /// made here (the directory may have just been removed, and a marker
    /// made now would hold its id forever); a directory that never had one
    /// (an export from before markers) stays found by path.
    pub(crate) fn write_places(&self, fid: FileId, places: &[Place]) {
        let r = sys::openat(raw(&self.fids), &dir_marker(fid), libc::O_RDONLY | libc::O_NOFOLLOW, 0)
            .and_then(|m| sys::fsetxattr(raw(&m), PLACE_XATTR, &encode(places)));
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => tracing::debug!(%fid, "a directory without a marker: no record"),
            Err(e) => tracing::warn!(%fid, "cannot record where a directory is: {e}"),
            Ok(()) => {}
        }
    }

    /// A rename is about to move directory `fid` from `old` to `new`: record
    /// both, the new place first, so it is found whether or not the rename
    /// happens (or the server stops in between). Returns the record before,
    /// to put back if the rename fails. The caller holds `fid`'s id lock.
    pub(crate) fn record_move(&self, fid: FileId, new: &Place, old: &Place) -> Vec<Place> {
        let before = self.read_places(fid).unwrap_or_default();
        self.write_places(fid, &[new.clone(), old.clone()]);
        before
    }

    /// A directory `fid` found as `name` in `parent` (by path, or under a
    /// place other than its first): make that its record. Checked again
    /// under the id lock, where no rename of `fid` is under way, so a
    /// rename that finished meanwhile is not undone by an old finding.
    pub(crate) fn record_place(&self, fid: FileId, parent: &OwnedFd, name: &str) {
        let Ok(Some(parent_id)) = read_fid(raw(parent), FileKind::Dir) else { return };
        let place = Place { parent: parent_id, name: name.to_string() };
        let _id = self.lock_id(fid);
        if self.open_verified(parent, &place, fid).is_ok() {
            self.write_places(fid, &[place]);
        }
    }
}
