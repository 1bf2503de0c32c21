//! Extended attributes, as posix has them: clients get the `user.`,
//! `trusted.` and `security.` namespaces, minus IMCa's own `<ns>.imca.*`
//! names (hidden, refused) and minus `security.capability` (posix's default
//! export policy keeps no set-id power); Linux allows `user.*` only on
//! regular files and directories.

use crate::tree::{err, Fs};
use bytes::Bytes;
use xlator::*;

const CLIENT_NAMESPACES: [&str; 3] = ["user.", "trusted.", "security."];

fn check_xattr_name(name: &str) -> FsResult<()> {
    if name.is_empty() || name.len() > 255 {
        return err(libc::ERANGE);
    }
    if !CLIENT_NAMESPACES.iter().any(|ns| name.starts_with(ns)) {
        return err(libc::ENOTSUP);
    }
    Ok(())
}

/// posix keeps its ids in `user.imca.fid` / `trusted.imca.fid`.
fn is_imca_xattr(name: &str) -> bool {
    name.split_once('.').is_some_and(|(_, rest)| rest.starts_with("imca."))
}

impl Fs {
    /// Whether the object may carry this xattr (Linux: `user.*` only on
    /// regular files and directories).
    fn may_carry(&self, fid: FileId, name: &str) -> bool {
        !name.starts_with("user.") || matches!(self.inode(fid).kind(), FileKind::File | FileKind::Dir)
    }

    pub fn setxattr(&mut self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        check_xattr_name(name)?;
        if is_imca_xattr(name) || name == "security.capability" {
            return err(libc::EPERM);
        }
        let fid = self.resolve(loc)?;
        if value.len() > XATTR_SIZE_MAX {
            return err(libc::E2BIG);
        }
        if !self.may_carry(fid, name) {
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
        if is_imca_xattr(name) {
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
        if is_imca_xattr(name) {
            return err(libc::EPERM);
        }
        let fid = self.resolve(loc)?;
        if !self.may_carry(fid, name) {
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
