//! The meta protocol (`mg ms md ma mn me`), memcached 1.6.18 flavour.
//!
//! Meta commands share the text protocol's line framing (see [`crate::text`]);
//! this module turns a tokenized line into a [`MetaCommand`]: a key and a
//! list of one-letter flags, each with an optional token (`T30`, `Oabc`).
//! Validation follows memcached's `_meta_flag_preparse`, including its error
//! strings; what each flag *does* is the cache node's business.

use std::borrow::Cow;

use crate::num::{strtol32, strtoul32, strtoull};
use crate::replies::{BAD_FORMAT, ERROR};
use crate::MAX_KEY_LEN;

/// Longest opaque (`O`) token memcached echoes.
pub const MAX_OPAQUE: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Get,
    Set,
    Delete,
    Arith,
    Noop,
    Debug,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaCommand<'a> {
    pub kind: Kind,
    /// The key, base64-decoded when the `b` flag is present.
    pub key: Cow<'a, [u8]>,
    /// `ms` only: length of the data block.
    pub datalen: usize,
    /// Flags in request order: (letter, token).
    pub flags: Vec<(u8, &'a [u8])>,
}

impl<'a> MetaCommand<'a> {
    pub fn has(&self, f: u8) -> bool {
        self.flags.iter().any(|&(c, _)| c == f)
    }
    pub fn token(&self, f: u8) -> Option<&'a [u8]> {
        self.flags.iter().find(|&&(c, _)| c == f).map(|&(_, t)| t)
    }
    pub fn num_i32(&self, f: u8) -> Option<i32> {
        self.token(f).and_then(strtol32)
    }
    pub fn num_u64(&self, f: u8) -> Option<u64> {
        self.token(f).and_then(strtoull)
    }
    pub fn flags_u32(&self) -> Option<u32> {
        self.token(b'F').and_then(strtoul32)
    }
    /// `M` token's first letter, upper-cased (`ms` and `ma` accept both cases).
    pub fn mode(&self) -> Option<u8> {
        self.token(b'M').and_then(|t| t.first()).map(|b| b.to_ascii_uppercase())
    }

    /// The command line with "\r\n" (a `ms` data block is the caller's).
    pub fn encode_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.kind {
            Kind::Get => b"mg",
            Kind::Set => b"ms",
            Kind::Delete => b"md",
            Kind::Arith => b"ma",
            Kind::Noop => b"mn",
            Kind::Debug => b"me",
        });
        if self.kind != Kind::Noop {
            out.push(b' ');
            if self.has(b'b') {
                out.extend_from_slice(base64_encode(&self.key).as_bytes());
            } else {
                out.extend_from_slice(&self.key);
            }
        }
        if self.kind == Kind::Set {
            out.extend_from_slice(format!(" {}", self.datalen).as_bytes());
        }
        for (f, t) in &self.flags {
            out.push(b' ');
            out.push(*f);
            out.extend_from_slice(t);
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A meta line memcached refuses: the error line to answer, and how many
/// bytes after the line to discard (the data block of a refused `ms`).
/// The text parser turns it into its `Frame::Error` (meta errors are never
/// `noreply`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub reply: &'static str,
    pub swallow: usize,
}

fn e(reply: &'static str, swallow: usize) -> Refused {
    Refused { reply, swallow }
}

/// Parses a tokenized meta line (`t[0]` is `mg`, `ms`, ...).
pub fn parse_tokens<'a>(t: &[&'a [u8]]) -> Result<MetaCommand<'a>, Refused> {
    let kind = match t[0] {
        b"mg" => Kind::Get,
        b"ms" => Kind::Set,
        b"md" => Kind::Delete,
        b"ma" => Kind::Arith,
        b"mn" => Kind::Noop,
        b"me" => Kind::Debug,
        _ => return Err(e(ERROR, 0)),
    };
    if kind == Kind::Noop {
        return Ok(MetaCommand { kind, key: Cow::Borrowed(b""), datalen: 0, flags: Vec::new() });
    }
    if t.len() < 2 {
        return Err(e(ERROR, 0));
    }
    if t[1].len() > MAX_KEY_LEN {
        return Err(e(BAD_FORMAT, 0));
    }
    let mut rest = &t[2..];
    let mut datalen = 0;
    if kind == Kind::Set {
        let Some(len) = rest.first().and_then(|l| strtol32(l)).filter(|&l| l >= 0) else {
            return Err(e(BAD_FORMAT, 0));
        };
        datalen = len as usize;
        rest = &rest[1..];
    }
    let swallow = if kind == Kind::Set { datalen + 2 } else { 0 };
    // ma and md report every flag problem with one generic message.
    let generic = |msg: &'static str| {
        if matches!(kind, Kind::Arith | Kind::Delete) {
            "CLIENT_ERROR invalid or duplicate flag"
        } else {
            msg
        }
    };
    let mut flags = Vec::with_capacity(rest.len());
    let mut seen = [false; 128];
    for tok in rest {
        let f = tok[0];
        let arg = &tok[1..];
        if f >= 128 || seen[f as usize] {
            return Err(e(generic("CLIENT_ERROR duplicate flag"), swallow));
        }
        seen[f as usize] = true;
        let ok = match f {
            b'b' | b'c' | b'f' | b'h' | b'k' | b'l' | b'O' | b'P' | b'L' | b'q' | b's' | b't' | b'u' | b'v' | b'I'
            | b'x' => true,
            b'N' | b'T' | b'R' => strtol32(arg).is_some(),
            b'F' => strtoul32(arg).is_some(),
            b'C' | b'J' | b'D' => strtoull(arg).is_some(),
            b'M' => true,
            _ => return Err(e(generic("CLIENT_ERROR invalid flag"), swallow)),
        };
        if !ok {
            return Err(e(generic("CLIENT_ERROR bad token in command line format"), swallow));
        }
        if f == b'O' && arg.len() > MAX_OPAQUE {
            return Err(e("CLIENT_ERROR opaque token too long", swallow));
        }
        flags.push((f, arg));
    }
    let mut cmd = MetaCommand { kind, key: Cow::Borrowed(t[1]), datalen, flags };
    if let Some(m) = cmd.mode() {
        let valid = match kind {
            Kind::Set => matches!(m, b'E' | b'A' | b'P' | b'R' | b'S'),
            Kind::Arith => matches!(m, b'I' | b'+' | b'D' | b'-'),
            _ => true,
        };
        if !valid {
            return Err(e(
                if kind == Kind::Arith { "CLIENT_ERROR invalid mode for ma M token" } else { "CLIENT_ERROR invalid mode for ms M token" },
                swallow,
            ));
        }
    }
    if cmd.has(b'b') {
        match base64_decode(t[1]) {
            Some(k) if !k.is_empty() => cmd.key = Cow::Owned(k),
            _ => return Err(e("CLIENT_ERROR error decoding key", swallow)),
        }
    }
    Ok(cmd)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(data: &[u8]) -> String {
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for c in s.chunks(4) {
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &b) in c.iter().enumerate() {
            let v = match b {
                b'=' if i >= 2 => {
                    pad += 1;
                    0
                }
                _ if pad > 0 => return None,
                _ => B64.iter().position(|&x| x == b)? as u32,
            };
            n = (n << 6) | v;
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for n in 0..10 {
            let d: Vec<u8> = (0..n).map(|i: u8| i.wrapping_mul(37)).collect();
            assert_eq!(base64_decode(base64_encode(&d).as_bytes()).unwrap(), d);
        }
        assert_eq!(base64_encode(b"foo"), "Zm9v");
    }
}
