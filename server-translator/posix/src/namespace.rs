//! Namespace operations (synchronous; run on the blocking pool).

use super::sys::{self, err, raw};
use super::places::Place;
use super::{kind_of, Obj, Posix};
use xlator::names::{check_name, check_new_name};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use xlator::*;

impl Posix {
    pub fn lookup(&self, parent: &Loc, name: &str) -> io::Result<Attr> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        let o = self.child(&dir, name)?;
        if kind_of(&o.st) == FileKind::Dir {
            // what a gateway looks up it uses next: by id, without a walk
            self.remember_dir(o.fid, &o.fd);
        }
        Ok(self.attr(&o))
    }

    pub fn getattr(&self, loc: &Loc) -> io::Result<Attr> {
        let o = self.resolve(loc)?;
        Ok(self.attr(&o))
    }

    pub fn setattr(&self, loc: &Loc, set: &SetAttr) -> io::Result<Attr> {
        let mut o = self.resolve(loc)?;
        // Refused before anything changes (root squash).
        self.policy().check_chown(set.uid, set.gid)?;
        let fd = raw(&o.fd);
        if let Some(size) = set.size {
            match kind_of(&o.st) {
                FileKind::File => {}
                FileKind::Dir => return Err(err(libc::EISDIR)),
                _ => return Err(err(libc::EINVAL)),
            }
            let data = self.data_fd_of(&o)?;
            sys::ftruncate(raw(&data), size)?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            sys::chown_fd(fd, set.uid, set.gid)?;
        }
        if let Some(perm) = set.perm {
            sys::chmod_fd(fd, self.policy().perm(perm))?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let conv = |t: Option<TimeSet>| {
                t.map(|t| match t {
                    TimeSet::Now => None,
                    TimeSet::At(ts) => Some((ts.secs, ts.nsecs)),
                })
            };
            sys::utimens_fd(fd, conv(set.atime), conv(set.mtime))?;
        }
        self.restat(&mut o)
    }

    pub fn readlink(&self, loc: &Loc) -> io::Result<String> {
        let o = self.resolve(loc)?;
        if kind_of(&o.st) != FileKind::Symlink {
            return Err(err(libc::EINVAL));
        }
        let t = sys::readlink_fd(raw(&o.fd))?;
        String::from_utf8(t).map_err(|_| err(libc::EILSEQ))
    }

    pub fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> io::Result<Made> {
        let dir = self.resolve_dir(parent)?;
        check_new_name(dir.fid, &new.name)?;
        let fmt = mode & libc::S_IFMT;
        if !matches!(fmt, libc::S_IFIFO | libc::S_IFSOCK | libc::S_IFCHR | libc::S_IFBLK | libc::S_IFREG | 0) {
            return Err(err(libc::EINVAL));
        }
        let fmt = if fmt == 0 { libc::S_IFREG } else { fmt };
        self.policy().check_mknod(fmt)?;
        let _name = self.lock_name(&dir, &new.name);
        let _id = self.lock_id(new.fid);
        self.check_new_fid(new.fid)?;
        sys::mknodat(raw(&dir.fd), &new.name, fmt | self.policy().perm(new.perm), rdev as u64)?;
        Ok(self.made(&dir, self.finish_create(&dir, new, None)?))
    }

    pub fn mkdir(&self, parent: &Loc, new: &NewFile) -> io::Result<Made> {
        let dir = self.resolve_dir(parent)?;
        check_new_name(dir.fid, &new.name)?;
        let _name = self.lock_name(&dir, &new.name);
        let _id = self.lock_id(new.fid);
        self.check_new_fid(new.fid)?;
        // The marker is taken before the directory is made, with its place.
        self.claim_dir_fid(new.fid, Some(&Place { parent: dir.fid, name: new.name.clone() }))?;
        let r = sys::mkdirat(raw(&dir.fd), &new.name, self.policy().perm(new.perm))
            .and_then(|()| self.finish_create(&dir, new, None));
        if r.is_err() {
            self.free_dir_fid(new.fid);
        }
        Ok(self.made(&dir, r?))
    }

    pub fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> io::Result<Made> {
        let dir = self.resolve_dir(parent)?;
        check_new_name(dir.fid, &new.name)?;
        let exclusive = new.exclusive || flags & libc::O_EXCL != 0;
        let _name = self.lock_name(&dir, &new.name);
        let _id = self.lock_id(new.fid);
        if let Err(e) = self.check_new_fid(new.fid) {
            // The id cannot go to a new file; an existing name is still
            // opened (the id in the call is then not used at all).
            if exclusive || e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
            let a = self.open_existing(&dir, &new.name, flags).map_err(|o| {
                if o.raw_os_error() == Some(libc::ENOENT) {
                    e
                } else {
                    o
                }
            })?;
            return Ok(self.made(&dir, a));
        }
        let base = libc::O_RDWR | libc::O_NOFOLLOW;
        let a = match sys::openat(raw(&dir.fd), &new.name, base | libc::O_CREAT | libc::O_EXCL, self.policy().perm(new.perm)) {
            Ok(fd) => self.finish_create(&dir, new, Some(fd)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !exclusive => self.open_existing(&dir, &new.name, flags),
            Err(e) => Err(e),
        };
        Ok(self.made(&dir, a?))
    }

    /// open(O_CREAT) of an existing name opens it, as a local FS would (a
    /// regular file counts as opened: a release will follow).
    fn open_existing(&self, dir: &Obj, name: &str, flags: i32) -> io::Result<Attr> {
        // (called by create, which holds the name's create lock)
        let mut o = self.child_holding_name(dir, name)?;
        match kind_of(&o.st) {
            FileKind::Dir => return Err(err(libc::EISDIR)),
            FileKind::Symlink => return Err(err(libc::ELOOP)),
            FileKind::File => {}
            _ => return Ok(self.attr(&o)),
        }
        if flags & libc::O_TRUNC != 0 {
            let data = self.data_fd_of(&o)?;
            sys::ftruncate(raw(&data), 0)?;
        }
        // Counted only with its fd cached (a file this server cannot open
        // is still answered, as before: its opens cannot keep it alive).
        match self.data_fd_of(&o) {
            Ok(_) => self.fds().opened(o.fid),
            Err(e) => tracing::debug!("create of an existing file it cannot open: {e}"),
        }
        self.restat(&mut o)
    }

    pub fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> io::Result<Made> {
        let dir = self.resolve_dir(parent)?;
        check_new_name(dir.fid, &new.name)?;
        if target.is_empty() {
            return Err(err(libc::ENOENT));
        }
        if target.len() >= libc::PATH_MAX as usize {
            return Err(err(libc::ENAMETOOLONG));
        }
        let _name = self.lock_name(&dir, &new.name);
        let _id = self.lock_id(new.fid);
        self.check_new_fid(new.fid)?;
        sys::symlinkat(target, raw(&dir.fd), &new.name)?;
        Ok(self.made(&dir, self.finish_create(&dir, new, None)?))
    }

    /// A new name's answer: its object, and directory `dir` as it is now,
    /// just after the change (taken while the name's lock is still held).
    fn made(&self, dir: &Obj, attr: Attr) -> Made {
        Made { attr, dir: self.dir_after(dir) }
    }

    /// Directory `dir`'s attributes as they are now, right after a change
    /// in it: what a gateway would be answered if it asked next (NFSv3's
    /// post-op attributes). None if it cannot be stat'ed: the gateway then
    /// asks.
    fn dir_after(&self, dir: &Obj) -> Option<Attr> {
        sys::fstat(raw(&dir.fd)).ok().map(|st| super::attr_of(&st, dir.fid, dir.linked))
    }

    /// Owner, permissions, id and per-fid link of a just-created object; on
    /// failure the new name is removed again so nothing half-made remains.
    fn finish_create(&self, dir: &Obj, new: &NewFile, data: Option<OwnedFd>) -> io::Result<Attr> {
        let r = self.try_finish_create(dir, new, data);
        if r.is_err() {
            let is_dir = sys::fstatat(raw(&dir.fd), &new.name).map(|st| kind_of(&st) == FileKind::Dir).unwrap_or(false);
            let _ = sys::unlinkat(raw(&dir.fd), &new.name, if is_dir { libc::AT_REMOVEDIR } else { 0 });
        }
        r
    }

    fn try_finish_create(&self, dir: &Obj, new: &NewFile, data: Option<OwnedFd>) -> io::Result<Attr> {
        let fd = sys::openat(raw(&dir.fd), &new.name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        let st = sys::fstat(raw(&fd))?;
        let kind = kind_of(&st);
        if self.root_user() {
            let owner = self.policy().owner(new.owner);
            sys::chown_fd(raw(&fd), Some(owner.uid), Some(owner.gid))?;
        }
        if kind != FileKind::Symlink {
            // mkdirat/mknodat/openat applied our umask (and a set-group-id
            // parent may have added S_ISGID): set exactly what is allowed.
            sys::chmod_fd(raw(&fd), self.policy().perm(new.perm))?;
        }
        let xname = super::fid_xattr(kind);
        let linked = match sys::setxattr(raw(&fd), xname, new.fid.to_hex().as_bytes(), 0) {
            Ok(()) => {
                if kind != FileKind::Dir {
                    self.link_fid(raw(&fd), new.fid)?;
                }
                kind != FileKind::Dir
            }
            Err(e) if kind == FileKind::File || kind == FileKind::Dir => return Err(e),
            Err(e) => {
                tracing::debug!("no id stored on {} ({e})", new.name);
                false
            }
        };
        if let Some(d) = data {
            // create opens the file: a release will follow.
            self.fds().insert(new.fid, Arc::new(d));
            self.fds().opened(new.fid);
        }
        let mut o = Obj { fd, st, fid: new.fid, linked };
        self.restat(&mut o)
    }

    pub fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> io::Result<Made> {
        let mut o = self.resolve(loc)?;
        if kind_of(&o.st) == FileKind::Dir {
            return Err(err(libc::EPERM));
        }
        let dir = self.resolve_dir(newparent)?;
        check_new_name(dir.fid, newname)?;
        sys::link_fd(raw(&o.fd), raw(&dir.fd), newname)?;
        let a = self.restat(&mut o)?;
        Ok(self.made(&dir, a))
    }

    pub fn unlink(&self, parent: &Loc, name: &str) -> io::Result<Removed> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        let o = self.child(&dir, name)?;
        if kind_of(&o.st) == FileKind::Dir {
            return Err(err(libc::EISDIR));
        }
        sys::unlinkat(raw(&dir.fd), name, 0)?;
        let dir_after = self.dir_after(&dir);
        let remaining = self.after_last_name_removed(&o)?;
        Ok(Removed { fid: o.fid, remaining, dir: dir_after })
    }

    pub fn rmdir(&self, parent: &Loc, name: &str) -> io::Result<Removed> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        let o = self.child(&dir, name)?;
        if kind_of(&o.st) != FileKind::Dir {
            return Err(err(libc::ENOTDIR));
        }
        sys::unlinkat(raw(&dir.fd), name, libc::AT_REMOVEDIR)?;
        let dir_after = self.dir_after(&dir);
        self.forget_dir(o.fid);
        self.free_dir_fid(o.fid);
        Ok(Removed { fid: o.fid, remaining: None, dir: dir_after })
    }

    /// A file whose last name just went: held for the removal grace (an
    /// open from a gateway whose kernel still had the name may be on its
    /// way), else closed now unless a gateway has it open.
    fn hold_or_forget(&self, o: &Obj) {
        let grace = self.removal_grace();
        if !grace.is_zero() && kind_of(&o.st) == FileKind::File && self.data_fd_of(o).is_ok() {
            if self.fds().hold(o.fid, std::time::Instant::now() + grace) {
                return;
            }
        }
        self.fds().forget_unless_open(o.fid);
    }

    /// After a name of `o` went away: its attributes if other names remain,
    /// else `None` — its per-fid link is dropped and, unless a gateway has
    /// it open, its cached fd is closed now, so its space is freed now (an
    /// fd kept until LRU eviction held deleted files' space for hours).
    fn after_last_name_removed(&self, o: &Obj) -> io::Result<Option<Attr>> {
        let remaining = if o.linked {
            self.unlink_fid_if_last(o.fid)?
        } else {
            let st = sys::fstat(raw(&o.fd))?;
            if st.st_nlink > 0 { Some(super::attr_of(&st, o.fid, false)) } else { None }
        };
        if remaining.is_none() {
            self.hold_or_forget(o);
        }
        Ok(remaining)
    }

    pub fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> io::Result<Renamed> {
        check_name(name)?;
        let from = self.resolve_dir(parent)?;
        let to = self.resolve_dir(newparent)?;
        check_new_name(to.fid, newname)?;
        let src = self.child(&from, name)?;
        let dst = match self.child(&to, newname) {
            Ok(o) => Some(o),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(e),
        };
        if flags.noreplace && flags.exchange {
            return Err(err(libc::EINVAL));
        }
        let mut f = 0;
        if flags.noreplace {
            f |= libc::RENAME_NOREPLACE;
        }
        if flags.exchange {
            f |= libc::RENAME_EXCHANGE;
        }
        let old_place = Place { parent: from.fid, name: name.to_string() };
        let new_place = Place { parent: to.fid, name: newname.to_string() };
        // Directories that move get their new place recorded (see `dirs`).
        let moving = |o: &Obj| kind_of(&o.st) == FileKind::Dir;
        let swapped = dst.as_ref().filter(|d| flags.exchange && moving(d)).map(|d| d.fid);
        if !moving(&src) && swapped.is_none() {
            sys::renameat2(raw(&from.fd), name, raw(&to.fd), newname, f)?;
        } else {
            let _ids = self.lock_ids(src.fid, swapped);
            let mut undo = Vec::new();
            if moving(&src) {
                undo.push((src.fid, self.record_move(src.fid, &new_place, &old_place)));
            }
            if let Some(d) = swapped {
                undo.push((d, self.record_move(d, &old_place, &new_place)));
            }
            if let Err(e) = sys::renameat2(raw(&from.fd), name, raw(&to.fd), newname, f) {
                for (fid, before) in undo.into_iter().filter(|(_, b)| !b.is_empty()) {
                    self.write_places(fid, &before);
                }
                return Err(e);
            }
        }
        let dir_after = self.dir_after(&from);
        // (the object's own descriptor: its attributes after, by no name)
        let moved_attr = sys::fstat(raw(&src.fd)).ok().map(|st| super::attr_of(&st, src.fid, src.linked));
        let newdir_after = if to.fid == from.fid { dir_after.clone() } else { self.dir_after(&to) };
        let replaced = match dst {
            Some(d) if !flags.exchange && (d.st.st_ino, d.st.st_dev) != (src.st.st_ino, src.st.st_dev) => {
                let remaining = if kind_of(&d.st) == FileKind::Dir {
                    self.forget_dir(d.fid);
                    self.free_dir_fid(d.fid);
                    None
                } else {
                    self.after_last_name_removed(&d)?
                };
                Some(Removed { fid: d.fid, remaining, dir: None })
            }
            _ => None,
        };
        Ok(Renamed { moved: src.fid, replaced, dir: dir_after, newdir: newdir_after, moved_attr })
    }
}
