//! Who may use the admin API.
//!
//! - **Changes** (PUT, POST, DELETE: config, block size, cache nodes, flush)
//!   always need the bearer token, on loopback too: any user of the host can
//!   reach a loopback port, and a change reaches the whole volume (a flush
//!   empties the bank, a node of the user's own joins the pool). A gateway
//!   started without a token serves a **read-only** API and says so in every
//!   401.
//! - **Reads** (status, config, options, cache nodes, `/metrics`, the OpenAPI
//!   document) stay open on a loopback listener: they show what the gateway's
//!   `--metrics` port and memcached's own `stats` already show any local
//!   user (addresses, sizes, counters; never file data, never the token), and
//!   monitoring and `imca ctl status` then work without the secret. On any
//!   other address every request but `/healthz` needs the token, and a
//!   gateway refuses to start exposed without one.
//!
//! The token is compared in constant time. [`Auth::load`] is the server side
//! (`--admin-token-file FILE` is created with a fresh token, mode 0600, when
//! missing); [`load_token`] the client side (`imca ctl`), which never creates.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Environment variable holding the token when no token file is given.
pub const TOKEN_ENV: &str = "IMCA_ADMIN_TOKEN";

/// Random bytes in a generated token (hex-encoded: 64 characters).
const TOKEN_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read admin token file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot create admin token file {path}: {source}")]
    Create { path: String, source: std::io::Error },
    #[error("admin token from {0} is empty")]
    Empty(String),
    #[error(
        "refusing to serve the admin API on non-loopback address {0} without a token: \
         pass --admin-token-file FILE or set {TOKEN_ENV}"
    )]
    ExposedWithoutToken(SocketAddr),
}

/// The client side: the token from `file` if given, else from
/// `$IMCA_ADMIN_TOKEN`, else none. Surrounding whitespace (a trailing
/// newline in the file) is not part of it. A missing file is an error.
pub fn load_token(file: Option<&Path>) -> Result<Option<String>, AuthError> {
    match file {
        Some(p) => read_token_file(p).map(Some),
        None => match std::env::var(TOKEN_ENV) {
            Ok(v) => trimmed(&v, &format!("${TOKEN_ENV}")).map(Some),
            Err(_) => Ok(None),
        },
    }
}

/// The token kept in `path`.
pub fn read_token_file(path: &Path) -> Result<String, AuthError> {
    let raw = std::fs::read_to_string(path).map_err(|source| AuthError::Read { path: path.display().to_string(), source })?;
    trimmed(&raw, &path.display().to_string())
}

fn trimmed(raw: &str, from: &str) -> Result<String, AuthError> {
    let t = raw.trim();
    if t.is_empty() {
        return Err(AuthError::Empty(from.to_string()));
    }
    Ok(t.to_string())
}

/// The token in `path`, or a fresh one written there (mode 0600, created
/// exclusively, so two starters cannot write two different tokens) when the
/// file does not exist. `imca up` and `imca mount --admin-token-file` use it.
/// A file that others can read is used but logged: it gives its readers
/// the volume.
pub fn ensure_token_file(path: &Path) -> Result<String, AuthError> {
    let created = || {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
        let token = generate_token()?;
        f.write_all(format!("{token}\n").as_bytes())?;
        f.sync_all()?;
        std::io::Result::Ok(token)
    };
    match created() {
        Ok(t) => {
            tracing::info!(file = %path.display(), "wrote a new admin token (mode 0600)");
            return Ok(t);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(AuthError::Create { path: path.display().to_string(), source }),
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(file = %path.display(), mode = format!("{mode:o}"),
                "the admin token file is readable by other users, who can then change the volume: chmod 600 it");
        }
    }
    read_token_file(path)
}

/// 32 bytes from the kernel's CSPRNG, hex-encoded.
pub fn generate_token() -> std::io::Result<String> {
    let mut b = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The server's side: its token (if any) and where it came from, which a
/// 401 names so the caller knows what to do (the place, never the token).
#[derive(Clone, Debug, Default)]
pub struct Auth {
    token: Option<String>,
    file: Option<PathBuf>,
}

impl Auth {
    /// No token: a read-only admin API (loopback only).
    pub fn none() -> Auth {
        Auth::default()
    }

    pub fn with_token(token: impl Into<String>) -> Auth {
        Auth { token: Some(token.into()), file: None }
    }

    /// `--admin-token-file FILE` (created with a fresh token if missing),
    /// else `$IMCA_ADMIN_TOKEN`, else none.
    pub fn load(file: Option<&Path>) -> Result<Auth, AuthError> {
        match file {
            Some(p) => Ok(Auth { token: Some(ensure_token_file(p)?), file: Some(p.to_path_buf()) }),
            None => Ok(Auth { token: load_token(None)?, file: None }),
        }
    }

    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The token file, when the token came from one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Does the `Authorization` header value carry this gateway's token?
    /// `Err` is the 401 message: what was wrong and what to do.
    pub fn check(&self, header: Option<&str>) -> Result<(), String> {
        let Some(token) = &self.token else {
            return Err(format!(
                "this gateway's admin API is read-only: it was started without an admin token. To change the \
                 volume through it, restart `imca mount` with --admin-token-file FILE (a fresh token is written \
                 there, mode 0600, if FILE does not exist) or ${TOKEN_ENV}, then pass the token: \
                 `imca ctl --token-file FILE ...` or `Authorization: Bearer <token>`"
            ));
        };
        if bearer_matches(header, token) {
            return Ok(());
        }
        let why = if header.is_some() { "wrong bearer token" } else { "missing bearer token" };
        let place = match &self.file {
            Some(f) => format!(
                "the token is in {} (readable by its owner): `imca ctl --token-file {0} ...`, or with `imca up`, \
                 `imca ctl --cluster DIR/cluster.json ...`",
                f.display()
            ),
            None => format!("the token is the gateway's ${TOKEN_ENV}: set it for `imca ctl` too"),
        };
        Err(format!("{why}: this request needs `Authorization: Bearer <token>`; {place}"))
    }
}

/// Refuse a non-loopback bind without a token. Call before binding.
pub fn check_exposure(addr: SocketAddr, token: Option<&str>) -> Result<(), AuthError> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(AuthError::ExposedWithoutToken(addr));
    }
    Ok(())
}

/// Does an `Authorization` header value carry `token`? Every byte of the
/// longer of the two is looked at, and no branch depends on the contents, so
/// response time does not reveal how much of a guess matched.
pub fn bearer_matches(header: Option<&str>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim) else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    // keep the optimiser from turning the loop into an early exit
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cretx"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer "), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }

    #[test]
    fn exposure() {
        assert!(check_exposure("127.0.0.1:9000".parse().unwrap(), None).is_ok());
        assert!(check_exposure("[::1]:9000".parse().unwrap(), None).is_ok());
        assert!(check_exposure("0.0.0.0:9000".parse().unwrap(), None).is_err());
        assert!(check_exposure("0.0.0.0:9000".parse().unwrap(), Some("t")).is_ok());
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("imca-admin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn token_file_is_trimmed_and_must_not_be_empty() {
        let dir = scratch("token");
        let f = dir.join("token");
        std::fs::write(&f, "abc\n").unwrap();
        assert_eq!(load_token(Some(&f)).unwrap().as_deref(), Some("abc"));
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(load_token(Some(&f)), Err(AuthError::Empty(_))));
        assert!(matches!(load_token(Some(&dir.join("missing"))), Err(AuthError::Read { .. })), "clients never create");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_missing_token_file_is_created_0600_and_then_kept() {
        let dir = scratch("ensure");
        let f = dir.join("admin.token");
        let t = ensure_token_file(&f).unwrap();
        assert_eq!(t.len(), 2 * TOKEN_BYTES);
        assert!(t.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(ensure_token_file(&f).unwrap(), t, "an existing token is reused");
        assert_eq!(Auth::load(Some(&f)).unwrap().token(), Some(t.as_str()));
        assert_ne!(generate_token().unwrap(), t);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn refusals_say_what_to_do() {
        let ro = Auth::none().check(Some("Bearer x")).unwrap_err();
        assert!(ro.contains("read-only") && ro.contains("--admin-token-file"), "{ro}");
        let a = Auth { token: Some("tok3n".into()), file: Some("/d/admin.token".into()) };
        assert!(a.check(Some("Bearer tok3n")).is_ok());
        let e = a.check(None).unwrap_err();
        assert!(e.starts_with("missing bearer token") && e.contains("/d/admin.token"), "{e}");
        let e = a.check(Some("Bearer tok3")).unwrap_err();
        assert!(e.starts_with("wrong bearer token") && !e.contains("tok3n"), "never the token itself: {e}");
        let env = Auth::with_token("tok3n").check(None).unwrap_err();
        assert!(env.contains(TOKEN_ENV) && !env.contains("tok3n"), "{env}");
    }
}
