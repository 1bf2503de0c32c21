//! Extended attributes of clients' objects (synchronous; blocking pool).
//!
//! ```text
//!  gateway kernel (checks who may: trusted.* needs CAP_SYS_ADMIN there)
//!    -> ... -> posix [names checked here] -> xattr syscalls on the export
//! ```
//!
//! Clients get the `user.`, `trusted.` and `security.` namespaces, as far as
//! the export's file system allows them (the server runs as root, so
//! `trusted.*` works where the file system has it; Linux allows `user.*` on
//! regular files and directories only). Other namespaces (`system.*`, POSIX
//! ACLs) are EOPNOTSUPP.
//!
//! Two limits are trust boundaries:
//! - IMCa's own names, `<namespace>.imca.*` (the file ids in `user.imca.fid`
//!   and `trusted.imca.fid`), are the server's: never listed, read as absent
//!   (ENODATA), and set or removed never (EPERM). A client that could
//!   rewrite an id could make one file answer for another.
//! - `security.capability` gives an executable privileges as set-user-id
//!   does, so it is refused (EPERM) unless the export keeps set-id bits
//!   (`--allow-setid`); removing it is always allowed.

use super::sys::{self, err, raw};
use super::Posix;
use bytes::Bytes;
use std::io;
use xlator::*;

/// The namespaces clients may use.
const CLIENT_NAMESPACES: [&str; 3] = ["user.", "trusted.", "security."];
/// File capabilities: what `--allow-setid` governs besides the mode bits.
pub const CAPABILITY_XATTR: &str = "security.capability";

/// Whether `name` is one of IMCa's own attributes (`user.imca.fid`,
/// `trusted.imca.fid`, and whatever else `<namespace>.imca.` comes to hold).
pub fn is_imca_xattr(name: &str) -> bool {
    name.split_once('.').is_some_and(|(_, rest)| rest.starts_with("imca."))
}

/// Whether a name the file system lists is shown to clients.
fn visible(name: &str) -> bool {
    CLIENT_NAMESPACES.iter().any(|ns| name.starts_with(ns)) && !is_imca_xattr(name)
}

/// A name a client may use at all: ERANGE for an impossible one (as the
/// kernel answers), EOPNOTSUPP outside the client namespaces.
fn check_xattr_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() > 255 {
        return Err(err(libc::ERANGE));
    }
    if !CLIENT_NAMESPACES.iter().any(|ns| name.starts_with(ns)) {
        return Err(err(libc::ENOTSUP));
    }
    Ok(())
}

impl Posix {
    pub fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> io::Result<()> {
        check_xattr_name(name)?;
        if is_imca_xattr(name) || (name == CAPABILITY_XATTR && !self.policy().allow_setid) {
            return Err(err(libc::EPERM));
        }
        let o = self.resolve(loc)?;
        let mut f = 0;
        if flags.create {
            f |= libc::XATTR_CREATE;
        }
        if flags.replace {
            f |= libc::XATTR_REPLACE;
        }
        sys::setxattr(raw(&o.fd), name, value, f)
    }

    pub fn getxattr(&self, loc: &Loc, name: &str) -> io::Result<Bytes> {
        check_xattr_name(name)?;
        if is_imca_xattr(name) {
            return Err(err(libc::ENODATA));
        }
        let o = self.resolve(loc)?;
        let mut buf = vec![0u8; xlator::XATTR_SIZE_MAX];
        let n = sys::getxattr(raw(&o.fd), name, &mut buf)?;
        buf.truncate(n);
        Ok(Bytes::from(buf))
    }

    pub fn listxattr(&self, loc: &Loc) -> io::Result<Vec<String>> {
        let o = self.resolve(loc)?;
        let mut buf = vec![0u8; xlator::XATTR_SIZE_MAX];
        let n = sys::listxattr(raw(&o.fd), &mut buf)?;
        Ok(buf[..n]
            .split(|&b| b == 0)
            .filter_map(|s| std::str::from_utf8(s).ok())
            .filter(|s| visible(s))
            .map(str::to_string)
            .collect())
    }

    pub fn removexattr(&self, loc: &Loc, name: &str) -> io::Result<()> {
        check_xattr_name(name)?;
        if is_imca_xattr(name) {
            return Err(err(libc::EPERM));
        }
        let o = self.resolve(loc)?;
        sys::removexattr(raw(&o.fd), name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imca_names_in_every_namespace_are_reserved() {
        for n in ["user.imca.fid", "trusted.imca.fid", "security.imca.x", "trusted.imca."] {
            assert!(is_imca_xattr(n), "{n}");
            assert!(!visible(n), "{n}");
        }
        for n in ["user.imca", "user.imcafid", "trusted.x.imca.fid", "imca.fid", "user.IMCA.fid"] {
            assert!(!is_imca_xattr(n), "{n}");
        }
    }

    #[test]
    fn client_namespaces() {
        for n in ["user.a", "trusted.t", "security.selinux", CAPABILITY_XATTR] {
            check_xattr_name(n).unwrap();
            assert!(visible(n), "{n}");
        }
        for n in ["system.posix_acl_access", "os2.x", "user", "nonamespace"] {
            assert_eq!(check_xattr_name(n).unwrap_err().raw_os_error(), Some(libc::ENOTSUP), "{n}");
            assert!(!visible(n), "{n}");
        }
        assert_eq!(check_xattr_name("").unwrap_err().raw_os_error(), Some(libc::ERANGE));
        assert_eq!(check_xattr_name(&format!("user.{}", "x".repeat(251))).unwrap_err().raw_os_error(), Some(libc::ERANGE));
    }
}
