//! Parsing a server's responses: bytes in, one typed [`Response`] out.
//!
//! [`parse`] reads the first response in a buffer, whether the bytes
//! trickled in over TCP or arrived in one RDMA message, and answers
//! [`Parsed::Done`]`(response, used)`, [`Parsed::Incomplete`] (read more,
//! keep the bytes) or [`Parsed::Invalid`] (the server said something no
//! memcached says: nothing after it on the connection can be trusted).
//! Responses borrow from the input, every slice of them lies within the
//! `used` bytes (callers may turn the slices back into offsets), and
//! nothing is allocated per response. A value's announced length is
//! checked against the caller's bound before anything waits for its data,
//! so a lying server cannot make a client buffer gigabytes.

use crate::response::{Response, Status, Value};

/// Longest response line, "\r\n" included. A value's header line is the
/// longest memcached writes (a 250-byte key and three numbers).
pub const MAX_LINE: usize = 4096;

/// memcached's ceiling on its item size (`-I` cannot go past 1 GiB): no
/// memcached-compatible server announces a larger value.
pub const MAX_VALUE: usize = 1 << 30;

/// Outcome of parsing the start of a server's output.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    /// A response and how many bytes of the input it used.
    Done(T, usize),
    /// Not enough bytes yet; nothing was consumed.
    Incomplete,
    /// Not a memcached response: the connection is out of step.
    Invalid(Invalid),
}

/// Why a response is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("reply line too long")]
    LineTooLong,
    #[error("reply line not ended by CRLF")]
    BareNewline,
    /// the line, lossily decoded (for the log)
    #[error("unexpected reply {0:?}")]
    Unknown(String),
    #[error("bad value header {0:?}")]
    BadValueHeader(String),
    #[error("value of {0} bytes is over the limit")]
    ValueTooLarge(u64),
    #[error("value not followed by CRLF")]
    NoCrlfAfterValue,
}

fn unknown(line: &[u8]) -> Parsed<Response<&[u8]>> {
    Parsed::Invalid(Invalid::Unknown(String::from_utf8_lossy(line).into_owned()))
}

/// Parses the first response in `buf`; values longer than `max_value` are
/// [`Invalid::ValueTooLarge`] (pass [`MAX_VALUE`] unless you know better).
pub fn parse(buf: &[u8], max_value: usize) -> Parsed<Response<&[u8]>> {
    let window = &buf[..buf.len().min(MAX_LINE)];
    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_LINE { Parsed::Invalid(Invalid::LineTooLong) } else { Parsed::Incomplete };
    };
    if nl == 0 || buf[nl - 1] != b'\r' {
        return Parsed::Invalid(Invalid::BareNewline);
    }
    let line = &buf[..nl - 1];
    let used = nl + 1;
    if let Some(head) = line.strip_prefix(b"VALUE ") {
        return value(buf, line, head, used, max_value);
    }
    let (word, rest) = match line.iter().position(|&b| b == b' ') {
        Some(sp) => (&line[..sp], Some(&line[sp + 1..])),
        None => (line, None),
    };
    if rest.is_none() {
        if let Some(s) = Status::from_word(word) {
            return Parsed::Done(Response::Status(s), used);
        }
        if let Some(n) = decimal(word) {
            return Parsed::Done(Response::Number(n), used);
        }
    }
    // an absent message is an empty slice of the input, as every slice is
    let msg = rest.unwrap_or(&line[line.len()..]);
    let r = match (word, rest) {
        (b"VERSION", _) => Response::Version(msg),
        (b"STAT", Some(rest)) => {
            let (name, value) = match rest.iter().position(|&b| b == b' ') {
                Some(sp) => (&rest[..sp], &rest[sp + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            if name.is_empty() {
                return unknown(line);
            }
            Response::Stat { name, value }
        }
        (b"CLIENT_ERROR", _) => Response::ClientError(msg),
        (b"SERVER_ERROR", _) => Response::ServerError(msg),
        (b"ERROR", None) | (b"ERROR:", Some(_)) => Response::Error(msg),
        _ => return unknown(line),
    };
    Parsed::Done(r, used)
}

/// `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`; `head` is the line after "VALUE ".
fn value<'a>(buf: &'a [u8], line: &[u8], head: &'a [u8], used: usize, max_value: usize) -> Parsed<Response<&'a [u8]>> {
    let bad = || Parsed::Invalid(Invalid::BadValueHeader(String::from_utf8_lossy(line).into_owned()));
    let mut t = head.split(|&b| b == b' ');
    let (Some(key), Some(flags), Some(len), cas, None) = (t.next(), t.next(), t.next(), t.next(), t.next()) else {
        return bad();
    };
    let flags = decimal(flags).and_then(|f| u32::try_from(f).ok());
    let cas = match cas {
        None => Some(None),
        Some(c) => decimal(c).map(Some),
    };
    let (Some(flags), Some(len), Some(cas)) = (flags, decimal(len), cas) else { return bad() };
    if key.is_empty() {
        return bad();
    }
    if len > max_value as u64 {
        return Parsed::Invalid(Invalid::ValueTooLarge(len));
    }
    let len = len as usize;
    let Some(end) = used.checked_add(len).and_then(|e| e.checked_add(2)) else {
        return Parsed::Invalid(Invalid::ValueTooLarge(len as u64));
    };
    let Some(block) = buf.get(used..end) else { return Parsed::Incomplete };
    if &block[len..] != b"\r\n" {
        return Parsed::Invalid(Invalid::NoCrlfAfterValue);
    }
    Parsed::Done(Response::Value(Value { key, flags, data: &block[..len], cas }), used + len + 2)
}

/// Plain decimal digits (no sign, no spaces), as memcached prints numbers.
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    s.iter().try_fold(0u64, |v, &b| {
        if b.is_ascii_digit() {
            v.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(b: &[u8]) -> Response<&[u8]> {
        match parse(b, 1 << 20) {
            Parsed::Done(r, used) => {
                assert_eq!(used, b.len(), "{:?}", String::from_utf8_lossy(b));
                r
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
        }
    }

    fn invalid(b: &[u8]) -> Invalid {
        match parse(b, 1 << 20) {
            Parsed::Invalid(e) => e,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(b)),
        }
    }

    #[test]
    fn every_kind_of_line() {
        assert_eq!(one(b"STORED\r\n"), Response::Status(Status::Stored));
        assert_eq!(one(b"NOT_STORED\r\n"), Response::Status(Status::NotStored));
        assert_eq!(one(b"EXISTS\r\n"), Response::Status(Status::Exists));
        assert_eq!(one(b"NOT_FOUND\r\n"), Response::Status(Status::NotFound));
        assert_eq!(one(b"DELETED\r\n"), Response::Status(Status::Deleted));
        assert_eq!(one(b"TOUCHED\r\n"), Response::Status(Status::Touched));
        assert_eq!(one(b"OK\r\n"), Response::Status(Status::Ok));
        assert_eq!(one(b"END\r\n"), Response::Status(Status::End));
        assert_eq!(one(b"18446744073709551615\r\n"), Response::Number(u64::MAX));
        assert_eq!(one(b"VERSION 1.6.18\r\n"), Response::Version(&b"1.6.18"[..]));
        assert_eq!(one(b"STAT curr_items 5\r\n"), Response::Stat { name: &b"curr_items"[..], value: &b"5"[..] });
        assert_eq!(one(b"ERROR\r\n"), Response::Error(&b""[..]));
        assert_eq!(one(b"ERROR: shutdown not enabled\r\n"), Response::Error(&b"shutdown not enabled"[..]));
        assert_eq!(one(b"CLIENT_ERROR bad data chunk\r\n"), Response::ClientError(&b"bad data chunk"[..]));
        assert_eq!(one(b"SERVER_ERROR out of memory\r\n"), Response::ServerError(&b"out of memory"[..]));
    }

    #[test]
    fn values_with_any_bytes() {
        let v = one(b"VALUE k 7 12 99\r\nEND\r\nVALUE x\r\n");
        assert_eq!(v, Response::Value(Value { key: &b"k"[..], flags: 7, data: &b"END\r\nVALUE x\r\n"[..12], cas: Some(99) }));
        assert_eq!(one(b"VALUE k 0 0\r\n\r\n"), Response::Value(Value { key: &b"k"[..], flags: 0, data: &b""[..], cas: None }));
    }

    #[test]
    fn incomplete_until_the_last_byte() {
        let all = b"VALUE key 1 5 3\r\nhello\r\n";
        for cut in 0..all.len() {
            assert_eq!(parse(&all[..cut], 1 << 20), Parsed::Incomplete, "cut at {cut}");
        }
        assert!(matches!(parse(b"VALUE key 1 5 3\r\nhello\r\nEND\r\n", 1 << 20), Parsed::Done(_, 24)));
    }

    #[test]
    fn lies_and_garbage() {
        assert_eq!(invalid(b"HELLO\r\n"), Invalid::Unknown("HELLO".into()));
        assert_eq!(invalid(b"STORED extra\r\n"), Invalid::Unknown("STORED extra".into()));
        assert_eq!(invalid(b"STORED\n"), Invalid::BareNewline);
        assert_eq!(invalid(b"\n"), Invalid::BareNewline);
        assert_eq!(invalid(b"-1\r\n"), Invalid::Unknown("-1".into()));
        assert_eq!(invalid(b"18446744073709551616\r\n"), Invalid::Unknown("18446744073709551616".into()));
        assert!(matches!(invalid(b"VALUE k 0\r\n"), Invalid::BadValueHeader(_)));
        assert!(matches!(invalid(b"VALUE k 0 1 2 3\r\n"), Invalid::BadValueHeader(_)));
        assert!(matches!(invalid(b"VALUE k 4294967296 1\r\n"), Invalid::BadValueHeader(_)));
        assert!(matches!(invalid(b"VALUE k 0 +1\r\n"), Invalid::BadValueHeader(_)));
        assert!(matches!(invalid(b"VALUE  0 1\r\n"), Invalid::BadValueHeader(_)));
        assert_eq!(invalid(b"VALUE k 0 2\r\nabXX"), Invalid::NoCrlfAfterValue);
        // a huge announced length is refused before any data is awaited
        assert_eq!(invalid(b"VALUE k 0 18446744073709551615\r\n"), Invalid::ValueTooLarge(u64::MAX));
        assert_eq!(invalid(b"VALUE k 0 1048577\r\n"), Invalid::ValueTooLarge(1048577));
        assert_eq!(invalid(&[b'x'; MAX_LINE]), Invalid::LineTooLong);
        assert_eq!(parse(&[b'x'; MAX_LINE - 1], 1), Parsed::Incomplete);
        assert!(matches!(invalid(b"STAT \r\n"), Invalid::Unknown(_)));
    }
}
