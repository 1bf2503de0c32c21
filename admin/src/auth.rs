//! Who may use the admin API. On loopback anyone on the host may (like
//! memcached's own stats port); on any other address a bearer token is
//! required, and a gateway refuses to start exposed without one.

use std::net::SocketAddr;
use std::path::Path;

/// Environment variable holding the token when no `--admin-token-file` is given.
pub const TOKEN_ENV: &str = "IMCA_ADMIN_TOKEN";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read admin token file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("admin token from {0} is empty")]
    Empty(String),
    #[error(
        "refusing to serve the admin API on non-loopback address {0} without a token: \
         pass --admin-token-file FILE or set {TOKEN_ENV}"
    )]
    ExposedWithoutToken(SocketAddr),
}

/// The token from `file` if given, else from `$IMCA_ADMIN_TOKEN`, else none.
/// Surrounding whitespace (a trailing newline in the file) is not part of it.
pub fn load_token(file: Option<&Path>) -> Result<Option<String>, AuthError> {
    let (raw, from) = match file {
        Some(p) => (
            std::fs::read_to_string(p).map_err(|source| AuthError::Read { path: p.display().to_string(), source })?,
            p.display().to_string(),
        ),
        None => match std::env::var(TOKEN_ENV) {
            Ok(v) => (v, format!("${TOKEN_ENV}")),
            Err(_) => return Ok(None),
        },
    };
    let t = raw.trim();
    if t.is_empty() {
        return Err(AuthError::Empty(from));
    }
    Ok(Some(t.to_string()))
}

/// Refuse a non-loopback bind without a token. Call before binding.
pub fn check_exposure(addr: SocketAddr, token: Option<&str>) -> Result<(), AuthError> {
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(AuthError::ExposedWithoutToken(addr));
    }
    Ok(())
}

/// Does an `Authorization` header value carry `token`? Compared without
/// early exit so response time does not reveal how much of a guess matched.
pub fn bearer_matches(header: Option<&str>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim) else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cretx"), "s3cret"));
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

    #[test]
    fn token_file_is_trimmed_and_must_not_be_empty() {
        let dir = std::env::temp_dir().join(format!("imca-admin-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("token");
        std::fs::write(&f, "abc\n").unwrap();
        assert_eq!(load_token(Some(&f)).unwrap().as_deref(), Some("abc"));
        std::fs::write(&f, "\n").unwrap();
        assert!(matches!(load_token(Some(&f)), Err(AuthError::Empty(_))));
        std::fs::remove_dir_all(&dir).ok();
    }
}
