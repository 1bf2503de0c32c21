//! Gathering a batch's replies, shared by every connection kind.
//!
//! Over TCP the reply bytes trickle in and the parser is fed each time more
//! arrive; over RDMA one message holds a whole batch's replies at once. Both
//! go through [`BatchParser::feed`], which takes only *complete* responses
//! (a line, or a VALUE block with its data) off the front of the buffer,
//! each parsed by cache-proto's client half, so the two transports cannot
//! disagree about what a node said.

use crate::error::BankError;
use bytes::{Buf, Bytes, BytesMut};
use cache_proto::client::{self, Parsed};
use cache_proto::response::{Response, Status, Value};
use std::fmt;

/// What one command answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `get`/`gets` of this many keys: any number of VALUE blocks, then END.
    /// The count only sizes buffers (an RDMA reply region); parsing ignores it.
    Values(u32),
    /// set/add/cas/delete/flush_all/version: one line
    Line,
}

impl Expect {
    /// Replies (values or lines) this one may bring.
    pub fn replies(&self) -> usize {
        match self {
            Expect::Values(n) => *n as usize,
            Expect::Line => 1,
        }
    }
}

/// One command's reply; its bytes are slices of the buffer they arrived in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// a get's hits (`cas` set for `gets`)
    Values(Vec<Value<Bytes>>),
    /// STORED, NOT_STORED, EXISTS, NOT_FOUND, DELETED, OK, an error ...
    Line(Response<Bytes>),
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Values(v) => write!(f, "{} values", v.len()),
            Reply::Line(r) => r.fmt(f),
        }
    }
}

/// Reply bytes the parser consumes from the front: a TCP connection's
/// growing `BytesMut`, or an RDMA reply's `Bytes` (values then stay slices of
/// the registered buffer the node wrote them into: no copy).
pub trait ReplyBuf: std::ops::Deref<Target = [u8]> + Buf {
    /// Split off the first `n` bytes.
    fn take(&mut self, n: usize) -> Bytes;
}

impl ReplyBuf for BytesMut {
    fn take(&mut self, n: usize) -> Bytes {
        self.split_to(n).freeze()
    }
}

impl ReplyBuf for Bytes {
    fn take(&mut self, n: usize) -> Bytes {
        self.split_to(n)
    }
}

/// The replies of one batch, parsed incrementally.
pub struct BatchParser {
    expect: Vec<Expect>,
    replies: Vec<Reply>,
    /// values of the `get` reply in progress
    vals: Vec<Value<Bytes>>,
}

impl BatchParser {
    pub fn new(expect: Vec<Expect>) -> BatchParser {
        BatchParser { replies: Vec::with_capacity(expect.len()), expect, vals: Vec::new() }
    }

    /// Consume every complete response at the front of `buf`. `Ok(true)`:
    /// the batch is fully answered (bytes after it stay in `buf`, they belong
    /// to the next batch); `Ok(false)`: more bytes are needed.
    pub fn feed<B: ReplyBuf>(&mut self, buf: &mut B, addr: &str) -> Result<bool, BankError> {
        while let Some(&e) = self.expect.get(self.replies.len()) {
            let Some(r) = next(buf, addr)? else { return Ok(false) };
            match (e, r) {
                // an error line is in sync (one line): report it, keep the connection
                (Expect::Line, r @ Response::Value(_)) => return Err(unexpected(addr, &r)),
                (Expect::Line, r) => self.replies.push(Reply::Line(r)),
                (Expect::Values(_), Response::Value(v)) => self.vals.push(v),
                (Expect::Values(_), Response::Status(Status::End)) => {
                    self.replies.push(Reply::Values(std::mem::take(&mut self.vals)))
                }
                (Expect::Values(_), r) if r.is_error() => return Err(BankError::Server(addr.into(), r.to_string())),
                (Expect::Values(_), r) => return Err(unexpected(addr, &r)),
            }
        }
        Ok(true)
    }

    pub fn finish(self) -> Vec<Reply> {
        self.replies
    }
}

fn unexpected(addr: &str, r: &Response<Bytes>) -> BankError {
    BankError::Protocol(addr.into(), format!("unexpected reply {:?}", r.to_string()))
}

/// Takes the first complete response off `buf`, holding its bytes as
/// slices of what was taken (no copy); `None` if it has not all arrived.
fn next<B: ReplyBuf>(buf: &mut B, addr: &str) -> Result<Option<Response<Bytes>>, BankError> {
    let base = buf.as_ptr() as usize;
    let (spans, used) = match client::parse(&buf[..], client::MAX_VALUE) {
        Parsed::Incomplete => return Ok(None),
        Parsed::Invalid(why) => return Err(BankError::Protocol(addr.into(), why.to_string())),
        // the parser's slices all lie in the bytes it used: keep them as offsets
        Parsed::Done(r, used) => {
            let spans = r.map(|s| {
                let at = s.as_ptr() as usize - base;
                at..at + s.len()
            });
            (spans, used)
        }
    };
    let item = buf.take(used);
    Ok(Some(spans.map(|at| item.slice(at))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(bytes: &[u8], expect: Vec<Expect>) -> Result<Vec<Reply>, BankError> {
        let mut p = BatchParser::new(expect);
        let mut buf = BytesMut::from(bytes);
        assert!(p.feed(&mut buf, "n")?, "incomplete");
        assert!(buf.is_empty());
        Ok(p.finish())
    }

    fn value(key: &'static [u8], data: &'static [u8], cas: Option<u64>) -> Value<Bytes> {
        Value { key: Bytes::from_static(key), flags: 0, data: Bytes::from_static(data), cas }
    }

    #[test]
    fn values_and_lines() {
        let r = parse_all(b"STORED\r\nVALUE a 0 3 7\r\na\r\n\r\nVALUE b 0 0\r\n\r\nEND\r\n", vec![Expect::Line, Expect::Values(2)]);
        assert_eq!(
            r.unwrap(),
            vec![
                Reply::Line(Response::Status(Status::Stored)),
                Reply::Values(vec![value(b"a", b"a\r\n", Some(7)), value(b"b", b"", None)])
            ]
        );
    }

    #[test]
    fn any_split_point_gives_the_same_replies() {
        let all = b"DELETED\r\nVALUE k 0 5\r\nhello\r\nEND\r\nVALUE z 1 2 9\r\nEN\r\nEND\r\n";
        let expect = vec![Expect::Line, Expect::Values(1), Expect::Values(1)];
        let whole = parse_all(all, expect.clone()).unwrap();
        for cut in 0..all.len() {
            let mut p = BatchParser::new(expect.clone());
            let mut buf = BytesMut::from(&all[..cut]);
            assert!(!p.feed(&mut buf, "n").unwrap());
            buf.extend_from_slice(&all[cut..]);
            assert!(p.feed(&mut buf, "n").unwrap());
            assert_eq!(p.finish(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_rdma_reply_is_sliced_not_copied() {
        let mut buf = Bytes::from_static(b"VALUE k 0 5\r\nhello\r\nEND\r\n");
        let start = buf.as_ptr() as usize;
        let mut p = BatchParser::new(vec![Expect::Values(1)]);
        assert!(p.feed(&mut buf, "n").unwrap());
        let Reply::Values(v) = &p.finish()[0] else { panic!() };
        assert_eq!(v[0].data.as_ptr() as usize, start + 13);
    }

    #[test]
    fn garbage_and_errors() {
        assert!(matches!(parse_all(b"SERVER_ERROR oom\r\n", vec![Expect::Values(1)]), Err(BankError::Server(..))));
        assert!(matches!(parse_all(b"HELLO\r\n", vec![Expect::Values(1)]), Err(BankError::Protocol(..))));
        assert!(matches!(parse_all(b"VALUE k 0 2\r\nabXX", vec![Expect::Values(1)]), Err(BankError::Protocol(..))));
        assert!(matches!(parse_all(b"VALUE k 0 2\r\nab\r\n", vec![Expect::Line]), Err(BankError::Protocol(..))));
        assert!(matches!(parse_all(b"VALUE k 0 99999999999\r\n", vec![Expect::Values(1)]), Err(BankError::Protocol(..))));
        assert_eq!(parse_all(b"ERROR\r\n", vec![Expect::Line]).unwrap(), vec![Reply::Line(Response::Error(Bytes::new()))]);
        let e = parse_all(b"SERVER_ERROR out of memory\r\n", vec![Expect::Values(1)]).unwrap_err();
        assert_eq!(e, BankError::Server("n".into(), "SERVER_ERROR out of memory".into()), "the line as the node wrote it");
    }
}
