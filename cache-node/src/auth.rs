//! memcached's ASCII authentication (`-Y authfile`), byte for byte as
//! memcached 1.6 does it (`try_read_command_asciiauth` in its proto_text.c).
//!
//! The file holds `user:password` lines. With it, a connection's first
//! command must be a login: `set <key> <flags> <exptime> <bytes>\r\n` with
//! `<user> <password>\r\n` as data (key, flags and expiry ignored), answered
//! `STORED`. Until then every line is answered `CLIENT_ERROR
//! unauthenticated`, and the binary protocol is never selected (its bytes
//! are read as text lines, as memcached does). Over RDMA each message is a
//! session of its own, so each must begin with the login.
//!
//! ```text
//!  unauthenticated ──line──> not "set k f e N" ──> CLIENT_ERROR unauthenticated
//!        │                   "set k f e N" ──N+2 bytes──> not ending \r\n  ──> CLIENT_ERROR bad command line termination
//!        │                                               < 2 words        ──> CLIENT_ERROR bad authentication token format
//!        │                                               wrong user/pass  ──> CLIENT_ERROR authentication failure
//!        └───────────────────────────────────────────── match            ──> STORED, then memcached's text protocol
//! ```
//!
//! One divergence, on purpose: memcached waits for however many bytes the
//! login line announces (up to 4 GiB); we close the connection when it
//! announces more than [`MAX_LOGIN`].

use std::fmt;
use std::path::{Path, PathBuf};

/// Lines longer than this without a newline close the connection (memcached's 2048).
pub const MAX_LINE: usize = 2048;
/// The largest login data we wait for.
pub const MAX_LOGIN: usize = 4096;

/// The accepted logins (`-Y`). `Debug` never shows passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct Users {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    #[error("auth file {0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("auth file {0}: line {1} is not user:password")]
    Malformed(PathBuf, usize),
    #[error("auth file {0} holds no user:password line")]
    Empty(PathBuf),
}

impl Users {
    /// Parse an auth file's text: `user:password` per line (the password
    /// runs to the end of the line; the user stops at the first colon).
    /// Empty lines are skipped; any other line without a colon is an error.
    pub fn parse(text: &str) -> Result<Users, usize> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            let (u, p) = line.split_once(':').ok_or(i + 1)?;
            entries.push((u.as_bytes().to_vec(), p.as_bytes().to_vec()));
        }
        Ok(Users { entries })
    }

    pub fn load(path: &Path) -> Result<Users, AuthFileError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthFileError::Io(path.to_owned(), e))?;
        let users = Users::parse(&text).map_err(|line| AuthFileError::Malformed(path.to_owned(), line))?;
        if users.entries.is_empty() {
            return Err(AuthFileError::Empty(path.to_owned()));
        }
        Ok(users)
    }

    /// Whether `user`/`pass` is a line of the file; compares every entry in
    /// full (no early exit on the first differing byte).
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let eq = |a: &[u8], b: &[u8]| a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0;
        self.entries.iter().fold(false, |ok, (u, p)| ok | (eq(u, user) & eq(p, pass)))
    }
}

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Users({} entries)", self.entries.len())
    }
}

/// Where a connection is in the login.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Login {
    /// waiting for a login line
    #[default]
    Line,
    /// got `set .. N`: waiting for N+2 bytes of data
    Data(usize),
    Done,
}

/// What one step of the login asks of the session.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// need more input
    Incomplete,
    /// consumed `used` bytes; write `reply` (if any) and go on
    Consumed { used: usize, reply: Option<&'static [u8]> },
    Close,
}

pub const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated\r\n";
const TERMINATION: &[u8] = b"CLIENT_ERROR bad command line termination\r\n";
const TOKEN_FORMAT: &[u8] = b"CLIENT_ERROR bad authentication token format\r\n";
pub const FAILURE: &[u8] = b"CLIENT_ERROR authentication failure\r\n";
pub const STORED: &[u8] = b"STORED\r\n";

/// memcached's tokenizer: split on spaces, empty words skipped, stopping at
/// a NUL (it works on C strings).
fn words(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    b[..end].split(|&c| c == b' ').filter(|w| !w.is_empty())
}

/// memcached's `safe_strtoul` on a word that may end in `\r`: digits, then
/// nothing or whitespace; never negative. Truncated to 32 bits as memcached does.
fn size_of(w: &[u8]) -> Option<usize> {
    let w = w.strip_suffix(b"\r").unwrap_or(w);
    if w.is_empty() || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(w).ok()?.parse().ok()?;
    Some((n & 0xffff_ffff) as usize)
}

impl Login {
    /// One step of the login over the front of `input`. `Done` when the
    /// login succeeded (then `self` is `Done` too).
    pub fn step(&mut self, input: &[u8], users: &Users) -> Step {
        match *self {
            Login::Done => Step::Consumed { used: 0, reply: None },
            Login::Line => {
                if input.len() < 2 {
                    return Step::Incomplete;
                }
                let Some(nl) = input.iter().position(|&c| c == b'\n') else {
                    return if input.len() > MAX_LINE { Step::Close } else { Step::Incomplete };
                };
                let w: Vec<&[u8]> = words(&input[..nl]).take(5).collect();
                let size = match w.as_slice() {
                    [b"set", _, _, _, n] => size_of(n),
                    _ => None,
                };
                match size {
                    None => Step::Consumed { used: nl + 1, reply: Some(UNAUTHENTICATED) },
                    Some(n) if n > MAX_LOGIN => Step::Close,
                    Some(n) => {
                        *self = Login::Data(n + 2);
                        Step::Consumed { used: nl + 1, reply: None }
                    }
                }
            }
            Login::Data(n) => {
                if input.len() < n {
                    return Step::Incomplete;
                }
                *self = Login::Line;
                let data = &input[..n];
                if !data.ends_with(b"\r\n") {
                    return Step::Consumed { used: n, reply: Some(TERMINATION) };
                }
                let mut w = words(&data[..n - 2]);
                let (Some(user), Some(pass)) = (w.next(), w.next()) else {
                    return Step::Consumed { used: n, reply: Some(TOKEN_FORMAT) };
                };
                if users.check(user, pass) {
                    *self = Login::Done;
                    Step::Consumed { used: n, reply: Some(STORED) }
                } else {
                    Step::Consumed { used: n, reply: Some(FAILURE) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        Users::parse("alice:secret1\nbob:pw:2\n\n").unwrap()
    }

    /// Feed `input` through the login as a session would; the replies, and
    /// whether it ended logged in.
    fn run(input: &[u8]) -> (Vec<u8>, Login) {
        let (mut l, mut at, mut out) = (Login::default(), 0, Vec::new());
        while l != Login::Done {
            match l.step(&input[at..], &users()) {
                Step::Incomplete | Step::Close => break,
                Step::Consumed { used, reply } => {
                    at += used;
                    out.extend_from_slice(reply.unwrap_or_default());
                }
            }
        }
        (out, l)
    }

    #[test]
    fn logins_as_memcached_answers_them() {
        assert_eq!(run(b"set x 0 0 13\r\nalice secret1\r\n"), (b"STORED\r\n".to_vec(), Login::Done));
        assert_eq!(run(b"set  x 1 -1 9 noreply\r\nbob pw:2 \r\n").1, Login::Done, "extra words are ignored");
        assert_eq!(run(b"get a\r\n").0, UNAUTHENTICATED);
        assert_eq!(run(b"add x 0 0 13\r\n").0, UNAUTHENTICATED);
        assert_eq!(run(b"set x 0 0 -1\r\n").0, UNAUTHENTICATED);
        assert_eq!(run(b"set x 0 0 11\r\nalice wrong\r\n").0, FAILURE);
        assert_eq!(run(b"set x 0 0 13\r\nALICE secret1\r\n").0, FAILURE);
        assert_eq!(run(b"set x 0 0 12\r\nalicesecret1\r\n").0, TOKEN_FORMAT);
        assert_eq!(run(b"set x 0 0 3\r\nabcde").0, TERMINATION);
        let (out, l) = run(b"set x 0 0 13\r\nalice secr");
        assert_eq!((out.as_slice(), l), (&b""[..], Login::Data(15)), "waits for the data");
    }

    #[test]
    fn junk_without_a_newline_closes_and_huge_logins_are_refused() {
        let mut l = Login::default();
        assert_eq!(l.step(&[b'x'; MAX_LINE], &users()), Step::Incomplete);
        assert_eq!(l.step(&[b'x'; MAX_LINE + 1], &users()), Step::Close);
        assert_eq!(l.step(b"set x 0 0 999999\r\n", &users()), Step::Close);
    }

    #[test]
    fn auth_files_and_debug() {
        assert!(Users::parse("nocolon\n").is_err());
        assert!(users().check(b"bob", b"pw:2"));
        assert!(!users().check(b"bob", b"pw"));
        assert_eq!(format!("{:?}", users()), "Users(2 entries)");
    }
}
