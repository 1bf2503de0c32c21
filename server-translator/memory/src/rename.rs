//! rename(2) with `RENAME_NOREPLACE` and `RENAME_EXCHANGE`, checked in the
//! order Linux's renameat2 and vfs_rename check (posix calls renameat2, so
//! its errnos are the kernel's).

use crate::tree::{err, Fs};
use xlator::names::{check_name, check_new_name};
use xlator::*;

impl Fs {
    pub fn rename(&mut self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        // posix's own checks
        check_name(name)?;
        let from = self.resolve_dir(parent)?;
        let to = self.resolve_dir(newparent)?;
        check_new_name(to, newname)?;
        let src = self.child(from, name)?;
        let dst = match self.child(to, newname) {
            Ok(d) => Some(d),
            Err(FsError::ENOENT) => None,
            Err(e) => return Err(e),
        };
        if flags.noreplace && flags.exchange {
            return err(libc::EINVAL);
        }
        // renameat2
        if flags.noreplace && dst.is_some() {
            return err(libc::EEXIST);
        }
        if flags.exchange && dst.is_none() {
            return err(libc::ENOENT);
        }
        if from != to {
            // a directory may not move beneath itself, nor be replaced by
            // something beneath it
            if self.is_ancestor_or_self(src, to) {
                return err(libc::EINVAL);
            }
            if dst.is_some_and(|d| self.is_ancestor_or_self(d, from)) {
                return err(if flags.exchange { libc::EINVAL } else { libc::ENOTEMPTY });
            }
        }
        // vfs_rename
        if dst == Some(src) {
            // two names of one file (or one name onto itself): nothing to do
            return Ok(self.renamed(from, to, src, None));
        }
        let src_dir = self.inode(src).kind() == FileKind::Dir;
        let Some(dst) = dst else {
            self.move_name(from, name, to, newname, src);
            return Ok(self.renamed(from, to, src, None));
        };
        let dst_dir = self.inode(dst).kind() == FileKind::Dir;
        if flags.exchange {
            self.exchange(from, name, src, to, newname, dst);
            return Ok(self.renamed(from, to, src, None));
        }
        match (src_dir, self.inode(dst).dir()) {
            (true, None) => return err(libc::ENOTDIR),
            (false, Some(_)) => return err(libc::EISDIR),
            (true, Some(d)) if !d.is_empty() => return err(libc::ENOTEMPTY),
            _ => {}
        }
        self.remove_name(to, newname);
        let remaining = if dst_dir {
            self.inodes.remove(&dst);
            None
        } else {
            self.unlinked(dst)
        };
        self.move_name(from, name, to, newname, src);
        Ok(self.renamed(from, to, src, Some(Removed { fid: dst, remaining, dir: None })))
    }

    /// The answer, with both directories' and the moved object's attributes just after.
    fn renamed(&self, from: FileId, to: FileId, moved: FileId, replaced: Option<Removed>) -> Renamed {
        Renamed { moved, replaced, dir: Some(self.attr(from)), newdir: Some(self.attr(to)), moved_attr: Some(self.attr(moved)) }
    }

    /// `from/name` (which is `fid`) becomes `to/newname` (which is free).
    fn move_name(&mut self, from: FileId, name: &str, to: FileId, newname: &str, fid: FileId) {
        self.remove_name(from, name);
        let i = self.inode_mut(fid);
        i.touch_ctime();
        i.parent = to;
        let is_dir = i.dir().is_some();
        let d = self.inode_mut(to);
        d.touch_mtime();
        d.dir_mut().expect("a resolved directory").insert(newname, fid, is_dir);
    }

    /// Swap what two names point at; both keep their place in listings.
    fn exchange(&mut self, from: FileId, name: &str, a: FileId, to: FileId, newname: &str, b: FileId) {
        let a_dir = self.inode(a).dir().is_some();
        let b_dir = self.inode(b).dir().is_some();
        self.dir_mut(from).repoint(name, b, b_dir);
        self.dir_mut(to).repoint(newname, a, a_dir);
        for (fid, parent) in [(a, to), (b, from)] {
            let i = self.inode_mut(fid);
            i.parent = parent;
            i.touch_ctime();
        }
        self.inode_mut(from).touch_mtime();
        self.inode_mut(to).touch_mtime();
    }
}
