//! The user and password the bank logs in to its nodes with, when they run
//! memcached's ASCII authentication (`memcached -Y authfile`, or
//! `imca cache-node -Y`).
//!
//! memcached's login is an ordinary-looking `set` whose data is
//! `<user> <password>`, answered `STORED`; it must be the first command on
//! a connection. The bank sends it as soon as a connection is up (TCP or
//! RDMA) and uses the connection only once it was accepted. The key and
//! flags are ignored by an authenticating node; the expiry of -1 makes a
//! node *without* authentication store the line already expired, so the
//! password never becomes readable there.
//!
//! By default the login derives from the volume secret
//! ([`Credentials::of_volume`]): every daemon holding the secret logs in as
//! `imca` with the same password, and `imca secret cache-auth` writes the
//! matching `-Y` file for the nodes. `--cache-auth-file` names another.
//!
//! The password crosses the cache network in the clear (as with memcached
//! itself): it keeps the node to the volume's daemons on a network whose
//! traffic others cannot read; values are protected by their MACs either way.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The user the volume's daemons log in as (the password is what proves it).
pub const VOLUME_USER: &str = "imca";

/// A node login. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cache auth file {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("cache auth file {path}: permissions {mode:04o} are too open (group or others can read it); run `chmod 600 {path}`")]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("cache auth file {0}: the first line must be user:password (no spaces, as in memcached's -Y file)")]
    Malformed(PathBuf),
}

impl Credentials {
    /// `user:password` (the first line of a memcached auth file). Neither
    /// part may hold a space or be empty: the login line is space-separated.
    pub fn parse(line: &str) -> Option<Credentials> {
        let line = line.trim_end_matches(['\r', '\n']);
        let (user, password) = line.split_once(':')?;
        let ok = |s: &str| !s.is_empty() && !s.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control());
        (ok(user) && ok(password)).then(|| Credentials { user: user.into(), password: password.into() })
    }

    /// The volume's own login: user `imca`, the password a key derived from
    /// the volume secret (`secret::Purpose::BankLogin`, in hex), so it says
    /// nothing about the secret or the other keys.
    pub fn of_volume(secret: &secret::Secret) -> Credentials {
        let key = secret.key(secret::Purpose::BankLogin);
        Credentials { user: VOLUME_USER.into(), password: key.raw().iter().map(|b| format!("{b:02x}")).collect() }
    }

    /// This login as a line of memcached's `-Y` auth file.
    pub fn auth_file_line(&self) -> String {
        format!("{}:{}\n", self.user, self.password)
    }

    /// Read the first line of `path`, which must not be readable by group
    /// or others (`--cache-auth-file`).
    pub fn load(path: &Path) -> Result<Credentials, CredentialsError> {
        let io = |e| CredentialsError::Io(path.to_owned(), e);
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.mode() & 0o077 != 0 {
            return Err(CredentialsError::TooOpen { path: path.to_owned(), mode: meta.mode() & 0o7777 });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Credentials::parse(text.lines().next().unwrap_or("")).ok_or_else(|| CredentialsError::Malformed(path.to_owned()))
    }

    /// The login command: memcached's `set <key> <flags> <exptime> <bytes>`
    /// with `<user> <password>` as data.
    pub fn login_command(&self) -> Vec<u8> {
        let data = format!("{} {}", self.user, self.password);
        format!("set imca:auth 0 -1 {}\r\n{data}\r\n", data.len()).into_bytes()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials {{ user: {:?}, password: .. }}", self.user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn parses_the_first_line_and_hides_the_password() {
        let c = Credentials::parse("imca:s3cret\n").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("imca", "s3cret"));
        assert_eq!(c.login_command(), b"set imca:auth 0 -1 11\r\nimca s3cret\r\n");
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(Credentials::parse("a:b:c").unwrap().password, "b:c", "memcached splits at the first colon");
        for bad in ["nocolon", ":pw", "user:", "us er:pw", "user:p w"] {
            assert!(Credentials::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_volume_login_is_derived_and_stable() {
        let s = secret::Secret::from_bytes(&[7u8; 32]).unwrap();
        let c = Credentials::of_volume(&s);
        assert_eq!(c, Credentials::of_volume(&s));
        assert_eq!((c.user.as_str(), c.password.len()), ("imca", 64));
        assert_ne!(c, Credentials::of_volume(&secret::Secret::from_bytes(&[8u8; 32]).unwrap()));
        assert_eq!(Credentials::parse(&c.auth_file_line()).unwrap(), c, "the -Y line reads back as the login");
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("auth");
        std::fs::write(&p, "u:p\nother:line\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(Credentials::load(&p), Err(CredentialsError::TooOpen { .. })));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Credentials::load(&p).unwrap().user, "u");
        std::fs::write(&p, "garbage\n").unwrap();
        assert!(matches!(Credentials::load(&p), Err(CredentialsError::Malformed(_))));
    }
}
