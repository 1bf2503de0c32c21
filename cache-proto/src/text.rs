//! The classic text protocol (and the framing the meta commands share with it).
//!
//! A request is a line ending in "\n" (an optional "\r" before it is dropped),
//! tokenized on single spaces exactly like memcached's `tokenize_command`;
//! storage commands (`set`, `ms`, ...) are followed by a data block of the
//! announced length plus "\r\n". [`parse`] returns a [`Frame`] for the first
//! request in a buffer, [`Parse::Incomplete`] if more bytes are needed, or
//! [`Parse::Close`] where memcached would drop the connection.

use crate::meta::{self, MetaCommand};
use crate::num::{strtol32, strtoul32, strtoull};
// the error lines live in their own module (meta answers them too); they are
// re-exported here, where the text protocol's users have always found them
pub use crate::replies::*;
use crate::{Parse, MAX_KEY_LEN};

/// memcached closes a connection after this many bytes without a newline,
/// unless the line is a (possibly huge) `get`/`gets`.
pub const MAX_LINE: usize = 2048;
/// Our bound for a multi-get line (memcached has none; we keep memory bounded).
pub const MAX_GET_LINE: usize = 4 << 20;

/// How a storage command combines the new data with an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOp {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

impl StoreOp {
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::Set => "set",
            StoreOp::Add => "add",
            StoreOp::Replace => "replace",
            StoreOp::Append => "append",
            StoreOp::Prepend => "prepend",
            StoreOp::Cas => "cas",
        }
    }
}

/// One parsed text-protocol command line (keys borrow from the input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// get / gets / gat / gats (`touch` carries the gat exptime)
    Get { keys: Vec<&'a [u8]>, cas: bool, touch: Option<i32> },
    Store { op: StoreOp, key: &'a [u8], flags: u32, exptime: i32, len: usize, cas: u64, noreply: bool },
    Delete { key: &'a [u8], noreply: bool },
    Arith { incr: bool, key: &'a [u8], delta: u64, noreply: bool },
    Touch { key: &'a [u8], exptime: i32, noreply: bool },
    /// delay <= 0 means now
    FlushAll { delay: i32, noreply: bool },
    Stats { args: Vec<&'a [u8]> },
    Version,
    Verbosity { noreply: bool },
    Quit,
    /// `shutdown [graceful]`; `None`: another mode (refused)
    Shutdown { graceful: Option<bool> },
    /// `cache_memlimit <megabytes>`: a new memory limit
    CacheMemlimit { mb: u64, noreply: bool },
    /// a tuning command of memcached's internals (`lru`, `lru_crawler`,
    /// `slabs`) that a node without slabs or crawler answers as memcached
    /// does, changing nothing: the reply line is fixed by the parser
    Tuning { line: &'a [u8], reply: &'static str },
    /// `watch [kind...]`: stream the node's log lines of these kinds
    /// (memcached's fetchers, mutations, ...); the node validates the kinds
    Watch { kinds: Vec<&'a [u8]>, noreply: bool },
    Meta(MetaCommand<'a>),
}

/// A complete request, or the error memcached answers for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `data` is the value for storage commands (without the "\r\n").
    Request { cmd: Command<'a>, data: &'a [u8] },
    /// Reply `reply` (a full line without "\r\n") unless `noreply`; then
    /// discard `swallow` more bytes (a data block we refuse to read).
    Error { reply: &'static str, noreply: bool, swallow: usize },
    /// A storage command whose value exceeds the item limit: answer
    /// "SERVER_ERROR object too large for cache", discard `swallow` bytes
    /// (which may not have arrived yet), and for `set` drop the old item.
    TooLarge { cmd: Command<'a>, swallow: usize },
}


/// Finds the first line: `Ok(Some((line, consumed)))`, `Ok(None)` if more
/// bytes are needed, `Err(())` if the connection must be closed.
#[allow(clippy::result_unit_err)]
pub fn split_line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ()> {
    match memchr(b'\n', buf) {
        Some(nl) => {
            let mut line = &buf[..nl];
            if line.len() > 1 && line[line.len() - 1] == b'\r' {
                line = &line[..line.len() - 1];
            }
            // memcached works on C strings: a NUL ends the command.
            if let Some(z) = memchr(0, line) {
                line = &line[..z];
            }
            Ok(Some((line, nl + 1)))
        }
        None if buf.len() > MAX_LINE => {
            let trimmed = buf.iter().position(|&b| b != b' ').unwrap_or(buf.len());
            let rest = &buf[trimmed..];
            if trimmed > 100 || !(rest.starts_with(b"get ") || rest.starts_with(b"gets ")) || buf.len() > MAX_GET_LINE {
                Err(())
            } else {
                Ok(None)
            }
        }
        None => Ok(None),
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// memcached's tokenizer: single spaces separate, empty tokens are skipped.
pub fn tokenize(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b' ').filter(|t| !t.is_empty()).collect()
}

/// Parses the first request in `buf`; `max_value` is the largest value accepted.
pub fn parse(buf: &[u8], max_value: usize) -> Parse<Frame<'_>> {
    let (line, used) = match split_line(buf) {
        Err(()) => return Parse::Close,
        Ok(None) => return Parse::Incomplete,
        Ok(Some(x)) => x,
    };
    let cmd = match parse_line(line) {
        Ok(LineOutcome::Cmd(c)) => c,
        Ok(LineOutcome::Close) => return Parse::Close,
        Err(e) => return Parse::Done(e, used),
    };
    let len = match &cmd {
        Command::Store { len, .. } => *len,
        Command::Meta(m) if m.kind == meta::Kind::Set => m.datalen,
        _ => return Parse::Done(Frame::Request { cmd, data: &[] }, used),
    };
    if len > max_value {
        return Parse::Done(Frame::TooLarge { cmd, swallow: len + 2 }, used);
    }
    let Some(block) = buf.get(used..used + len + 2) else {
        return Parse::Incomplete;
    };
    if &block[len..] != b"\r\n" {
        let noreply = match &cmd {
            Command::Store { noreply, .. } => *noreply,
            _ => false, // meta set always reports errors
        };
        return Parse::Done(Frame::Error { reply: BAD_CHUNK, noreply, swallow: 0 }, used + len + 2);
    }
    Parse::Done(Frame::Request { cmd, data: &block[..len] }, used + len + 2)
}

/// The reply memcached 1.6.18 (crawler idle, no slab moves possible) gives
/// to a tuning command, `None` for its ERROR.
fn tuning(t: &[&[u8]]) -> Option<&'static str> {
    let num = |i: usize| t.get(i).and_then(|w| std::str::from_utf8(w).ok()?.parse::<u64>().ok());
    Some(match (t[0], t.get(1).copied()?) {
        (b"lru_crawler", b"enable" | b"disable" | b"crawl") => "OK",
        (b"lru_crawler", b"sleep" | b"tocrawl") => num(2).map(|_| "OK")?,
        // no key listing: nothing is dumped (memcached lists keys here)
        (b"lru_crawler", b"metadump") => "END",
        (b"lru", b"mode") => matches!(t.get(2).copied()?, b"flat" | b"segmented").then_some("OK")?,
        (b"lru", b"temp_ttl") => num(2).map(|_| "OK")?,
        (b"slabs", b"automove") => num(2).filter(|n| *n <= 2).map(|_| "OK")?,
        (b"slabs", b"reassign") => "NOSPARE source class has no spare pages",
        _ => return None,
    })
}

/// What a command line turns into.
pub enum LineOutcome<'a> {
    Cmd(Command<'a>),
    /// memcached drops connections that look like HTTP.
    Close,
}

fn err<'a>(reply: &'static str, noreply: bool) -> Frame<'a> {
    Frame::Error { reply, noreply, swallow: 0 }
}

/// Parses one command line (without its line ending) the way memcached's
/// `process_command_ascii` dispatches it.
pub fn parse_line(line: &[u8]) -> Result<LineOutcome<'_>, Frame<'_>> {
    let t = tokenize(line);
    let n = t.len() + 1; // memcached counts a terminal token
    let noreply = t.len() > 1 && t[t.len() - 1] == b"noreply";
    let first = line.first().copied().unwrap_or(0);
    if first == b'm' && line.len() >= 2 && (line.len() == 2 || line[2] == b' ') {
        return meta::parse_tokens(&t)
            .map(|m| LineOutcome::Cmd(Command::Meta(m)))
            .map_err(|r| Frame::Error { reply: r.reply, noreply: false, swallow: r.swallow });
    }
    let Some(&name) = t.first() else { return Err(err(ERROR, false)) };
    let want = |ok: bool| if ok { Ok(()) } else { Err(err(ERROR, false)) };
    let cmd = match name {
        b"get" | b"gets" | b"gat" | b"gats" => {
            want(n >= 3)?;
            let cas = name == b"gets" || name == b"gats";
            let (touch, keys) = if name.starts_with(b"gat") {
                match strtol32(t[1]) {
                    Some(e) => (Some(e), &t[2..]),
                    None => return Err(err(BAD_EXPTIME, false)),
                }
            } else {
                (None, &t[1..])
            };
            if keys.iter().any(|k| k.len() > MAX_KEY_LEN) {
                return Err(err(BAD_FORMAT, false));
            }
            Command::Get { keys: keys.to_vec(), cas, touch }
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let op = match name {
                b"set" => StoreOp::Set,
                b"add" => StoreOp::Add,
                b"replace" => StoreOp::Replace,
                b"append" => StoreOp::Append,
                b"prepend" => StoreOp::Prepend,
                _ => StoreOp::Cas,
            };
            if op == StoreOp::Cas { want(n == 7 || n == 8)? } else { want(n == 6 || n == 7)? }
            if t[1].len() > MAX_KEY_LEN {
                return Err(err(BAD_FORMAT, noreply));
            }
            let (Some(flags), Some(exptime), Some(vlen)) = (strtoul32(t[2]), strtol32(t[3]), strtol32(t[4])) else {
                return Err(err(BAD_FORMAT, noreply));
            };
            let mut cas = 0;
            if op == StoreOp::Cas {
                cas = strtoull(t[5]).ok_or_else(|| err(BAD_FORMAT, noreply))?;
            }
            if !(0..=i32::MAX - 2).contains(&vlen) {
                return Err(err(BAD_FORMAT, noreply));
            }
            Command::Store { op, key: t[1], flags, exptime, len: vlen as usize, cas, noreply }
        }
        b"delete" => {
            want((3..=5).contains(&n))?;
            if n > 3 {
                let hold_zero = t[2] == b"0";
                let valid = (n == 4 && (hold_zero || noreply)) || (n == 5 && hold_zero && noreply);
                if !valid {
                    return Err(err(DELETE_USAGE, noreply));
                }
            }
            if t[1].len() > MAX_KEY_LEN {
                return Err(err(BAD_FORMAT, noreply));
            }
            Command::Delete { key: t[1], noreply }
        }
        b"incr" | b"decr" => {
            want(n == 4 || n == 5)?;
            if t[1].len() > MAX_KEY_LEN {
                return Err(err(BAD_FORMAT, noreply));
            }
            let delta = strtoull(t[2]).ok_or_else(|| err(BAD_DELTA, noreply))?;
            Command::Arith { incr: name == b"incr", key: t[1], delta, noreply }
        }
        b"touch" => {
            want(n == 4 || n == 5)?;
            if t[1].len() > MAX_KEY_LEN {
                return Err(err(BAD_FORMAT, noreply));
            }
            let exptime = strtol32(t[2]).ok_or_else(|| err(BAD_EXPTIME, noreply))?;
            Command::Touch { key: t[1], exptime, noreply }
        }
        b"flush_all" => {
            want((2..=4).contains(&n))?;
            let mut delay = 0;
            if n != if noreply { 3 } else { 2 } {
                delay = strtol32(t[1]).ok_or_else(|| err(BAD_EXPTIME, noreply))?;
            }
            Command::FlushAll { delay, noreply }
        }
        b"stats" => Command::Stats { args: t[1..].to_vec() },
        b"watch" => Command::Watch { kinds: t[1..].to_vec(), noreply },
        b"version" => Command::Version,
        b"quit" => Command::Quit,
        b"shutdown" => Command::Shutdown {
            graceful: match t.get(1).copied() {
                None => Some(false),
                Some(b"graceful") if t.len() == 2 => Some(true),
                Some(_) => None,
            },
        },
        b"verbosity" => {
            want(n == 3 || n == 4)?;
            strtoul32(t[1]).ok_or_else(|| err(BAD_FORMAT, noreply))?;
            Command::Verbosity { noreply }
        }
        b"cache_memlimit" => {
            want(n == 3 || n == 4)?;
            let mb = std::str::from_utf8(t[1]).ok().and_then(|s| s.parse::<u64>().ok());
            Command::CacheMemlimit { mb: mb.ok_or_else(|| err(ERROR, false))?, noreply }
        }
        b"lru" | b"lru_crawler" | b"slabs" => Command::Tuning { line, reply: tuning(&t).ok_or_else(|| err(ERROR, false))? },
        _ => {
            if t[t.len() - 1].starts_with(b"HTTP/") {
                return Ok(LineOutcome::Close);
            }
            return Err(err(ERROR, false));
        }
    };
    Ok(LineOutcome::Cmd(cmd))
}

/// Reply composition: the few line shapes the text protocol uses.
pub mod reply {
    /// `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`
    pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
        value_header(out, key, flags, data.len(), cas);
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }

    /// `VALUE <key> <flags> <bytes> [<cas>]\r\n`
    pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        out.push(b' ');
        push_u64(out, u64::from(flags));
        out.push(b' ');
        push_u64(out, len as u64);
        if let Some(c) = cas {
            out.push(b' ');
            push_u64(out, c);
        }
        out.extend_from_slice(b"\r\n");
    }

    pub fn line(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    pub fn stat(out: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
        use std::io::Write;
        let _ = write!(out, "STAT {name} {value}\r\n");
    }

    /// Decimal without allocation (hot path: every VALUE line).
    pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        out.extend_from_slice(&buf[i..]);
    }
}
