//! Export hygiene: what clients may put in an export, whoever they claim to be.
//!
//! The storage server runs as root and sets the owner a gateway names, so
//! without limits a client could leave a setuid-root program or a device
//! node of the system disk in a directory that local users can reach. By
//! default an export behaves like a `nosuid,nodev` mount, enforced at the
//! source: character and block devices cannot be created (EPERM) and the
//! set-user-id / set-group-id bits are dropped from every mode a client sets
//! (create, mkdir, mknod, chmod), silently, as the kernel drops S_ISGID when
//! a non-member chmods. `--root-squash` also maps the owner uid/gid 0 of new
//! objects to nobody (65534) and refuses a chown to 0, as NFS does; it cannot
//! limit what root on a gateway host reads (the gateway's kernel checks
//! permissions against the attributes, and the server does not see who asks).

use crate::sys::err;
use std::io;
use xlator::Owner;

/// The uid/gid that root becomes under `--root-squash` (NFS's anonuid).
pub const NOBODY: u32 = 65534;

const SETID: u32 = libc::S_ISUID | libc::S_ISGID;

/// What clients may do beyond plain files, directories, symlinks, fifos and
/// sockets. The default is the safe one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportPolicy {
    /// allow character and block device nodes (`imca storage --allow-devices`)
    pub allow_devices: bool,
    /// keep set-user-id and set-group-id bits (`imca storage --allow-setid`)
    pub allow_setid: bool,
    /// owner 0 becomes nobody on create; chown to 0 is refused (`--root-squash`)
    pub root_squash: bool,
}

impl ExportPolicy {
    /// The permission bits to store for a mode a client asked for.
    pub fn perm(&self, asked: u32) -> u32 {
        let p = asked & 0o7777;
        if self.allow_setid {
            p
        } else {
            p & !SETID
        }
    }

    /// EPERM for a device node unless devices are allowed.
    pub fn check_mknod(&self, fmt: u32) -> io::Result<()> {
        if matches!(fmt, libc::S_IFCHR | libc::S_IFBLK) && !self.allow_devices {
            return Err(err(libc::EPERM));
        }
        Ok(())
    }

    /// The owner a new object gets.
    pub fn owner(&self, asked: Owner) -> Owner {
        if !self.root_squash {
            return asked;
        }
        let squash = |id: u32| if id == 0 { NOBODY } else { id };
        Owner { uid: squash(asked.uid), gid: squash(asked.gid) }
    }

    /// EPERM for a chown to root under root squash.
    pub fn check_chown(&self, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        if self.root_squash && (uid == Some(0) || gid == Some(0)) {
            return Err(err(libc::EPERM));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nosuid_nodev_without_squash() {
        let p = ExportPolicy::default();
        assert_eq!(p.perm(0o6755), 0o755);
        assert_eq!(p.perm(0o1777), 0o1777, "the sticky bit is harmless");
        assert_eq!(p.check_mknod(libc::S_IFBLK).unwrap_err().raw_os_error(), Some(libc::EPERM));
        assert_eq!(p.check_mknod(libc::S_IFCHR).unwrap_err().raw_os_error(), Some(libc::EPERM));
        p.check_mknod(libc::S_IFIFO).unwrap();
        assert_eq!(p.owner(Owner { uid: 0, gid: 0 }), Owner { uid: 0, gid: 0 });
        p.check_chown(Some(0), Some(0)).unwrap();
    }

    #[test]
    fn options_allow_and_squash() {
        let p = ExportPolicy { allow_devices: true, allow_setid: true, root_squash: true };
        assert_eq!(p.perm(0o6755), 0o6755);
        p.check_mknod(libc::S_IFBLK).unwrap();
        assert_eq!(p.owner(Owner { uid: 0, gid: 0 }), Owner { uid: NOBODY, gid: NOBODY });
        assert_eq!(p.owner(Owner { uid: 1000, gid: 0 }), Owner { uid: 1000, gid: NOBODY });
        assert!(p.check_chown(Some(0), None).is_err() && p.check_chown(None, Some(0)).is_err());
        p.check_chown(Some(1000), Some(100)).unwrap();
    }
}
