//! Extended attributes: SETXATTR, GETXATTR, LISTXATTR, REMOVEXATTR go down
//! the graph. The coherence translator forgets a file's remembered
//! attributes and capability on a change, and remembers a server's "no
//! `security.capability`" (or "no `security.selinux`") under the lease, so
//! the GETXATTR the kernel sends before every write, and `ls -l` for every
//! name, is answered here (`KernelCache::known_absent`).
//!
//! Unless the mount passes them through (`--selinux`), the storage hosts'
//! SELinux labels are not shown: `security.selinux` is answered EOPNOTSUPP
//! here and left out of listings, as GlusterFS does without `--selinux`.
//! A host's label means nothing to a client's policy, and `ls -l` asks for
//! the label of every name it lists until one answer says "not supported"
//! (then it stops asking for that file system).

use super::fs::GatewayFs;
use coherence::Asked;
use fuser::*;
use std::ffi::OsStr;
use xlator::{FsError, Stateful, XattrFlags};

/// The xattr holding a file's SELinux label.
const LABEL: &str = "security.selinux";

impl GatewayFs {
    /// Whether `name` is the SELinux label and labels are not passed through.
    fn hidden(&self, name: &[u8]) -> bool {
        !self.selinux && name == LABEL.as_bytes()
    }

    pub(super) fn set_xattr(&self, ino: INodeNo, name: &OsStr, value: &[u8], flags: i32, reply: ReplyEmpty) {
        if self.hidden(name.as_encoded_bytes()) {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let co = self.co.clone();
        let args = self.inodes.loc(ino.0).and_then(|l| Ok((l, name.to_str().ok_or(FsError::EILSEQ)?.to_string())));
        let value = value.to_vec();
        let xflags = XattrFlags { create: flags & libc::XATTR_CREATE != 0, replace: flags & libc::XATTR_REPLACE != 0 };
        let work = async move {
            let (loc, name) = args?;
            co.setxattr(&loc, &name, &value, xflags).await
        };
        self.answer(reply, work, |r, ()| r.ok());
    }

    pub(super) fn get_xattr(&self, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if self.hidden(name.as_encoded_bytes()) {
            self.kc.refused_label();
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        // Asked before every write, or of every listed name (see `Asked`).
        let asked = name.to_str().and_then(Asked::of);
        if asked.is_some_and(|x| self.kc.known_absent(ino.0, x)) {
            return reply.error(Errno::from_i32(libc::ENODATA));
        }
        let co = self.co.clone();
        let args = self.inodes.loc(ino.0).and_then(|l| Ok((l, name.to_str().ok_or(FsError::ENODATA)?.to_string())));
        let work = async move {
            let (loc, name) = args?;
            co.getxattr(&loc, &name).await
        };
        self.answer(reply, work, move |r, v| reply_xattr(r, size, &v));
    }

    pub(super) fn list_xattrs(&self, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let (co, loc, selinux) = (self.co.clone(), self.inodes.loc(ino.0), self.selinux);
        self.answer(reply, async move { co.listxattr(&loc?).await }, move |r, names| {
            let mut buf = Vec::new();
            for n in names.iter().filter(|n| selinux || *n != LABEL) {
                buf.extend_from_slice(n.as_bytes());
                buf.push(0);
            }
            reply_xattr(r, size, &buf)
        });
    }

    pub(super) fn remove_xattr(&self, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.hidden(name.as_encoded_bytes()) {
            return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let co = self.co.clone();
        let args = self.inodes.loc(ino.0).and_then(|l| Ok((l, name.to_str().ok_or(FsError::ENODATA)?.to_string())));
        let work = async move {
            let (loc, name) = args?;
            co.removexattr(&loc, &name).await
        };
        self.answer(reply, work, |r, ()| r.ok());
    }
}

/// getxattr/listxattr protocol: size 0 asks for the length only.
fn reply_xattr(reply: ReplyXattr, size: u32, value: &[u8]) {
    if size == 0 {
        reply.size(value.len() as u32);
    } else if value.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}
