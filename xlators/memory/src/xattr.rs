//! Extended attributes: clients get the `user.` namespace only, minus the
//! `user.imca.` names posix keeps for itself; Linux allows `user.*` only on
//! regular files and directories.

use crate::tree::{err, Fs, HIDDEN_XATTR_PREFIX};
use bytes::Bytes;
use xlator::*;

fn check_xattr_name(name: &str) -> FsResult<()> {
    if name.is_empty() || name.len() > 255 {
        return err(libc::ERANGE);
    }
    if !name.starts_with("user.") {
        return err(libc::ENOTSUP);
    }
    Ok(())
}

impl Fs {
    /// Whether the object may carry `user.*` xattrs.
    fn user_xattrs(&self, fid: FileId) -> bool {
        matches!(self.inode(fid).kind(), FileKind::File | FileKind::Dir)
    }

    pub fn setxattr(&mut self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        check_xattr_name(name)?;
        if name.starts_with(HIDDEN_XATTR_PREFIX) {
            return err(libc::EPERM);
        }
        let fid = self.resolve(loc)?;
        if value.len() > XATTR_SIZE_MAX {
            return err(libc::E2BIG);
        }
        if !self.user_xattrs(fid) {
            return err(libc::EPERM);
        }
        let i = self.inode_mut(fid);
        let exists = i.xattrs.contains_key(name);
        if flags.create && exists {
            return err(libc::EEXIST);
        }
        if flags.replace && !exists {
            return err(libc::ENODATA);
        }
        i.xattrs.insert(name.to_string(), value.to_vec());
        i.touch_ctime();
        Ok(())
    }

    pub fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        check_xattr_name(name)?;
        if name.starts_with(HIDDEN_XATTR_PREFIX) {
            return err(libc::ENODATA);
        }
        let fid = self.resolve(loc)?;
        match self.inode(fid).xattrs.get(name) {
            Some(v) => Ok(Bytes::copy_from_slice(v)),
            None => err(libc::ENODATA),
        }
    }

    pub fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        let fid = self.resolve(loc)?;
        Ok(self.inode(fid).xattrs.keys().cloned().collect())
    }

    pub fn removexattr(&mut self, loc: &Loc, name: &str) -> FsResult<()> {
        check_xattr_name(name)?;
        if name.starts_with(HIDDEN_XATTR_PREFIX) {
            return err(libc::EPERM);
        }
        let fid = self.resolve(loc)?;
        if !self.user_xattrs(fid) {
            return err(libc::EPERM);
        }
        let i = self.inode_mut(fid);
        if i.xattrs.remove(name).is_none() {
            return err(libc::ENODATA);
        }
        i.touch_ctime();
        Ok(())
    }
}
