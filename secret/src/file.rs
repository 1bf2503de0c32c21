//! The secret's file: `imca secret new FILE` writes it, every daemon's
//! `--secret-file` reads it. Like ssh with a private key, a daemon refuses a
//! file that other users can read or that is not a plain file.

use super::Secret;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Shortest secret accepted (256 bits).
pub const MIN_SECRET_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("volume secret {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("volume secret {0} does not exist; create one with `imca secret new {0}` and give the same file to every storage server and gateway of the volume")]
    Missing(PathBuf),
    #[error("volume secret {0} is not a regular file")]
    NotAFile(PathBuf),
    #[error("volume secret {path}: permissions {mode:04o} are too open (others can read it); run `chmod 600 {path}`")]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("volume secret {0}: expected hexadecimal digits (as `imca secret new` writes)")]
    NotHex(PathBuf),
    #[error("volume secret of {0} bytes is too short; at least {MIN_SECRET_BYTES} (64 hex digits)")]
    TooShort(usize),
    #[error("volume secret {0} already exists; not overwriting it (every daemon of the volume uses it)")]
    Exists(PathBuf),
}

impl Secret {
    /// Read and check a secret file.
    pub fn load(path: &Path) -> Result<Secret, SecretError> {
        let io = |e| SecretError::Io(path.to_owned(), e);
        let meta = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SecretError::Missing(path.to_owned())),
            r => r.map_err(io)?,
        };
        if !meta.is_file() {
            return Err(SecretError::NotAFile(path.to_owned()));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(SecretError::TooOpen { path: path.to_owned(), mode: meta.mode() & 0o7777 });
        }
        // Bounded: a secret file is tiny; a huge one is a mistake.
        let text = std::fs::read_to_string(path).map_err(io)?;
        let hex = text.trim();
        if hex.len() > 1024 || hex.len() % 2 != 0 || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(SecretError::NotHex(path.to_owned()));
        }
        let bytes: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
        Secret::from_bytes(&bytes)
    }

    /// Write this secret to a new file, mode 0600; refuses to overwrite.
    pub fn write_new(&self, path: &Path) -> Result<(), SecretError> {
        let mut f = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(SecretError::Exists(path.to_owned())),
            r => r.map_err(|e| SecretError::Io(path.to_owned(), e))?,
        };
        f.write_all(self.to_hex().as_bytes()).and_then(|_| f.sync_all()).map_err(|e| SecretError::Io(path.to_owned(), e))
    }

    /// The secret in `path`, creating it first if there is none (`imca up`).
    pub fn load_or_create(path: &Path) -> Result<Secret, SecretError> {
        match Secret::load(path) {
            Err(SecretError::Missing(_)) => {
                let s = Secret::generate();
                match s.write_new(path) {
                    Ok(()) => Ok(s),
                    // lost a race with another creator: use theirs
                    Err(SecretError::Exists(_)) => Secret::load(path),
                    Err(e) => Err(e),
                }
            }
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn round_trip_and_every_refusal() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("volume.secret");
        assert!(matches!(Secret::load(&p), Err(SecretError::Missing(_))));
        let s = Secret::load_or_create(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(Secret::load(&p).unwrap(), s);
        assert!(matches!(Secret::generate().write_new(&p), Err(SecretError::Exists(_))));
        assert_eq!(Secret::load_or_create(&p).unwrap(), s, "an existing secret is kept");

        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Secret::load(&p).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");

        let q = d.path().join("short");
        std::fs::write(&q, "abcd\n").unwrap();
        std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(Secret::load(&q), Err(SecretError::TooShort(2))));
        std::fs::write(&q, "not hex at all, not hex at all, not hex at all, not hex at all!!\n").unwrap();
        assert!(matches!(Secret::load(&q), Err(SecretError::NotHex(_))));
        assert!(matches!(Secret::load(d.path()), Err(SecretError::NotAFile(_))));
    }
}
