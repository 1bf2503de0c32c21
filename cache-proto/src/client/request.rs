//! Composing requests: the bytes a client sends for a [`Command`], which
//! the server half ([`crate::text::parse`]) reads back into the same command.

use crate::meta::Kind;
use crate::text::reply::push_u64;
use crate::text::{Command, StoreOp};

/// Longest `get` line [`multi_get`] writes. memcached reads a command line
/// in 2 KiB steps and only keeps reading past that for a `get`; staying
/// under it keeps every server on its fast path.
pub const MULTI_GET_LINE: usize = 1900;

fn push_i32(out: &mut Vec<u8>, v: i32) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, u64::from(v.unsigned_abs()));
}

/// ` <number>`
fn arg_u64(out: &mut Vec<u8>, v: u64) {
    out.push(b' ');
    push_u64(out, v);
}

fn arg_i32(out: &mut Vec<u8>, v: i32) {
    out.push(b' ');
    push_i32(out, v);
}

fn arg(out: &mut Vec<u8>, token: &[u8]) {
    out.push(b' ');
    out.extend_from_slice(token);
}

fn noreply(out: &mut Vec<u8>, on: bool) {
    if on {
        out.extend_from_slice(b" noreply");
    }
}

impl Command<'_> {
    /// Appends the command line, "\r\n" included; a storage command's data
    /// block is the caller's (or use [`request`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Command::Get { keys, cas, touch } => {
                out.extend_from_slice(match (touch.is_some(), cas) {
                    (false, false) => b"get".as_slice(),
                    (false, true) => b"gets",
                    (true, false) => b"gat",
                    (true, true) => b"gats",
                });
                if let Some(e) = touch {
                    arg_i32(out, *e);
                }
                for k in keys {
                    arg(out, k);
                }
            }
            Command::Store { op, key, flags, exptime, len, cas, noreply: nr } => {
                out.extend_from_slice(op.name().as_bytes());
                arg(out, key);
                arg_u64(out, u64::from(*flags));
                arg_i32(out, *exptime);
                arg_u64(out, *len as u64);
                if *op == StoreOp::Cas {
                    arg_u64(out, *cas);
                }
                noreply(out, *nr);
            }
            Command::Delete { key, noreply: nr } => {
                out.extend_from_slice(b"delete");
                arg(out, key);
                noreply(out, *nr);
            }
            Command::Arith { incr, key, delta, noreply: nr } => {
                out.extend_from_slice(if *incr { b"incr" } else { b"decr" });
                arg(out, key);
                arg_u64(out, *delta);
                noreply(out, *nr);
            }
            Command::Touch { key, exptime, noreply: nr } => {
                out.extend_from_slice(b"touch");
                arg(out, key);
                arg_i32(out, *exptime);
                noreply(out, *nr);
            }
            Command::FlushAll { delay, noreply: nr } => {
                // "flush_all" and "flush_all 0" mean the same; the short one is what we always sent
                out.extend_from_slice(b"flush_all");
                if *delay != 0 {
                    arg_i32(out, *delay);
                }
                noreply(out, *nr);
            }
            Command::Stats { args } => {
                out.extend_from_slice(b"stats");
                for a in args {
                    arg(out, a);
                }
            }
            Command::Version => out.extend_from_slice(b"version"),
            Command::Verbosity { noreply: nr } => {
                out.extend_from_slice(b"verbosity 1");
                noreply(out, *nr);
            }
            Command::Quit => out.extend_from_slice(b"quit"),
            Command::Shutdown { graceful } => out.extend_from_slice(match graceful {
                Some(false) => b"shutdown".as_slice(),
                Some(true) => b"shutdown graceful",
                None => b"shutdown invalid",
            }),
            Command::CacheMemlimit { mb, noreply: nr } => {
                out.extend_from_slice(b"cache_memlimit");
                arg_u64(out, *mb);
                noreply(out, *nr);
            }
            Command::Tuning { line, .. } => out.extend_from_slice(line),
            Command::Watch { kinds, .. } => {
                out.extend_from_slice(b"watch");
                for k in kinds {
                    arg(out, k);
                }
            }
            Command::Meta(m) => {
                m.encode_line(out);
                return;
            }
        }
        out.extend_from_slice(b"\r\n");
    }

    /// Storage commands (`set`..., `ms`) are followed by a data block.
    pub fn has_data(&self) -> bool {
        match self {
            Command::Store { .. } => true,
            Command::Meta(m) => m.kind == Kind::Set,
            _ => false,
        }
    }
}

/// Appends a whole request: the command line and, for a storage command,
/// `data` and its "\r\n" (`data.len()` must be the length the command names).
pub fn request(out: &mut Vec<u8>, cmd: &Command<'_>, data: &[u8]) {
    cmd.encode(out);
    if cmd.has_data() {
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `get` (or, with `cas`, `gets`) lines asking for `keys` in
/// order, as few as fit in [`MULTI_GET_LINE`]-byte lines. Returns how many
/// keys each line asks for: each line is answered on its own (its values,
/// then END).
pub fn multi_get(out: &mut Vec<u8>, cas: bool, keys: &[&[u8]]) -> Vec<usize> {
    let verb = if cas { "gets" } else { "get" }.len();
    let mut lines = Vec::new();
    let (mut first, mut len) = (0, 0);
    for (i, k) in keys.iter().enumerate() {
        if i > first && len + 1 + k.len() > MULTI_GET_LINE {
            lines.push(first..i);
            first = i;
        }
        if i == first {
            len = verb;
        }
        len += 1 + k.len();
    }
    if first < keys.len() {
        lines.push(first..keys.len());
    }
    for r in &lines {
        Command::Get { keys: keys[r.clone()].to_vec(), cas, touch: None }.encode(out);
    }
    lines.into_iter().map(|r| r.len()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(cmd: Command<'_>, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        request(&mut out, &cmd, data);
        out
    }

    #[test]
    fn the_bytes_the_bank_sends() {
        let store = |op, exptime, cas| Command::Store { op, key: b"k", flags: 0, exptime, len: 2, cas, noreply: false };
        assert_eq!(bytes(store(StoreOp::Set, 0, 0), b"ab"), b"set k 0 0 2\r\nab\r\n");
        assert_eq!(bytes(store(StoreOp::Add, 30, 0), b"ab"), b"add k 0 30 2\r\nab\r\n");
        assert_eq!(bytes(store(StoreOp::Cas, 0, 77), b"ab"), b"cas k 0 0 2 77\r\nab\r\n");
        assert_eq!(bytes(Command::Delete { key: b"k", noreply: false }, b""), b"delete k\r\n");
        assert_eq!(bytes(Command::FlushAll { delay: 0, noreply: false }, b""), b"flush_all\r\n");
        assert_eq!(bytes(Command::FlushAll { delay: -3, noreply: true }, b""), b"flush_all -3 noreply\r\n");
        assert_eq!(bytes(Command::Touch { key: b"k", exptime: i32::MIN, noreply: false }, b""), b"touch k -2147483648\r\n");
    }

    #[test]
    fn multi_get_splits_lines_as_the_bank_always_did() {
        let mut out = Vec::new();
        assert!(multi_get(&mut out, false, &[]).is_empty());
        assert!(out.is_empty());
        let long: Vec<Vec<u8>> = (0..100).map(|i| format!("key:{i}:{}", "x".repeat(60)).into_bytes()).collect();
        let keys: Vec<&[u8]> = long.iter().map(|k| k.as_slice()).collect();
        let per = multi_get(&mut out, true, &keys);
        assert_eq!(per.iter().sum::<usize>(), 100);
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), per.len());
        for (l, n) in lines.iter().zip(&per) {
            assert!(l.len() - 1 <= MULTI_GET_LINE, "{} bytes", l.len());
            assert!(l.starts_with(b"gets "));
            assert_eq!(l.split(|&b| b == b' ').count() - 1, *n);
        }
        // a key longer than a line still goes out, alone
        let huge = vec![b'h'; 2000];
        out.clear();
        assert_eq!(multi_get(&mut out, false, &[b"a", &huge, b"b"]), vec![1, 1, 1]);
    }
}
