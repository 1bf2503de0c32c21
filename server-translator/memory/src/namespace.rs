//! Names: lookup, the four creates, link, unlink, rmdir (rename has its own
//! file). Each checks what posix checks, in the order posix does.

use crate::dir::Dir;
use crate::tree::{allowed_perm, err, Content, Fs, Inode};
use xlator::names::{check_name, check_new_name};
use xlator::*;

impl Fs {
    pub fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        Ok(self.attr(self.child(dir, name)?))
    }

    /// The directory a new name goes in, once the name is valid and free.
    fn new_name(&self, parent: &Loc, name: &str) -> FsResult<FileId> {
        let dir = self.resolve_dir(parent)?;
        check_new_name(dir, name)?;
        Ok(dir)
    }

    fn free(&self, dir: FileId, name: &str) -> FsResult<()> {
        match self.dir(dir).get(name) {
            Some(_) => err(libc::EEXIST),
            None => Ok(()),
        }
    }

    pub fn mknod(&mut self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        let dir = self.new_name(parent, &new.name)?;
        let fmt = mode & libc::S_IFMT;
        let content = match fmt {
            0 | libc::S_IFREG => Content::File(Vec::new()),
            libc::S_IFIFO => Content::Special(FileKind::Fifo),
            libc::S_IFSOCK => Content::Special(FileKind::Socket),
            libc::S_IFCHR => Content::Special(FileKind::CharDev),
            libc::S_IFBLK => Content::Special(FileKind::BlockDev),
            _ => return err(libc::EINVAL),
        };
        if matches!(fmt, libc::S_IFCHR | libc::S_IFBLK) {
            // posix's default export policy (`nodev`)
            return err(libc::EPERM);
        }
        self.check_new_fid(new.fid)?;
        self.free(dir, &new.name)?;
        let mut inode = Inode::new(content, allowed_perm(new.perm), new.owner, dir);
        if matches!(fmt, libc::S_IFCHR | libc::S_IFBLK) {
            // mknod(2) ignores the device number of anything else
            inode.rdev = rdev;
        }
        self.add(dir, &new.name, new.fid, inode);
        Ok(self.made(dir, new.fid))
    }

    pub fn mkdir(&mut self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        let dir = self.new_name(parent, &new.name)?;
        self.check_new_fid(new.fid)?;
        self.free(dir, &new.name)?;
        let perm = allowed_perm(new.perm);
        self.add(dir, &new.name, new.fid, Inode::new(Content::Dir(Dir::default()), perm, new.owner, dir));
        Ok(self.made(dir, new.fid))
    }

    /// Create (and open) a regular file; an existing name is opened instead
    /// unless the create is exclusive, as open(O_CREAT) does. The id must be
    /// new (posix's rule), even when an existing name is opened instead.
    pub fn create(&mut self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let dir = self.new_name(parent, &new.name)?;
        let exclusive = new.exclusive || flags & libc::O_EXCL != 0;
        let fid_ok = self.check_new_fid(new.fid);
        if let Err(e) = fid_ok {
            if exclusive || e == FsError::EINVAL {
                return Err(e);
            }
        }
        let Some(e) = self.dir(dir).get(&new.name) else {
            fid_ok?;
            let inode = Inode::new(Content::File(Vec::new()), allowed_perm(new.perm), new.owner, dir);
            self.add(dir, &new.name, new.fid, inode);
            self.opened(new.fid);
            return Ok(self.made(dir, new.fid));
        };
        if exclusive {
            return err(libc::EEXIST);
        }
        let fid = e.fid;
        match self.inode(fid).kind() {
            FileKind::Dir => return err(libc::EISDIR),
            FileKind::Symlink => return err(libc::ELOOP),
            FileKind::File => {}
            _ => return Ok(self.made(dir, fid)),
        }
        if flags & libc::O_TRUNC != 0 {
            self.truncate(fid, 0)?;
        }
        self.opened(fid);
        Ok(self.made(dir, fid))
    }

    pub fn symlink(&mut self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        let dir = self.new_name(parent, &new.name)?;
        if target.is_empty() {
            return err(libc::ENOENT);
        }
        if target.len() >= libc::PATH_MAX as usize {
            return err(libc::ENAMETOOLONG);
        }
        self.check_new_fid(new.fid)?;
        self.free(dir, &new.name)?;
        // a symlink's permission bits are always 0777
        self.add(dir, &new.name, new.fid, Inode::new(Content::Symlink(target.to_string()), 0o777, new.owner, dir));
        Ok(self.made(dir, new.fid))
    }

    /// A new name's answer: `fid`'s attributes, and directory `dir`'s as
    /// they are now, just after the change (the post-op attributes posix
    /// gives too).
    fn made(&self, dir: FileId, fid: FileId) -> Made {
        Made { attr: self.attr(fid), dir: Some(self.attr(dir)) }
    }

    pub fn link(&mut self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        let fid = self.resolve(loc)?;
        if self.inode(fid).kind() == FileKind::Dir {
            return err(libc::EPERM);
        }
        let dir = self.new_name(newparent, newname)?;
        self.free(dir, newname)?;
        let i = self.inode_mut(fid);
        if i.links == 0 {
            // an unlinked file, still open: Linux will not give it a name again
            return err(libc::ENOENT);
        }
        i.links += 1;
        i.touch_ctime();
        let d = self.inode_mut(dir);
        d.touch_mtime();
        d.dir_mut().expect("a resolved directory").insert(newname, fid, false);
        Ok(self.made(dir, fid))
    }

    pub fn unlink(&mut self, parent: &Loc, name: &str) -> FsResult<Removed> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        let fid = self.child(dir, name)?;
        if self.inode(fid).kind() == FileKind::Dir {
            return err(libc::EISDIR);
        }
        self.remove_name(dir, name);
        Ok(Removed { fid, remaining: self.unlinked(fid), dir: Some(self.attr(dir)) })
    }

    pub fn rmdir(&mut self, parent: &Loc, name: &str) -> FsResult<Removed> {
        check_name(name)?;
        let dir = self.resolve_dir(parent)?;
        let fid = self.child(dir, name)?;
        match self.inode(fid).dir() {
            None => return err(libc::ENOTDIR),
            Some(d) if !d.is_empty() => return err(libc::ENOTEMPTY),
            Some(_) => {}
        }
        self.remove_name(dir, name);
        self.inodes.remove(&fid);
        Ok(Removed { fid, remaining: None, dir: Some(self.attr(dir)) })
    }

    pub fn remove_name(&mut self, dir: FileId, name: &str) {
        let d = self.inode_mut(dir);
        d.touch_mtime();
        d.dir_mut().expect("a resolved directory").remove(name);
    }
}
