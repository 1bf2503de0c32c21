//! Parsing a batch's replies, shared by every connection kind.
//!
//! Over TCP the reply bytes trickle in and the parser is fed each time more
//! arrive; over RDMA one message holds a whole batch's replies at once. Both
//! go through [`BatchParser::feed`], which consumes only *complete* reply
//! items (a line, or a VALUE block with its data) and reports how far it
//! got, so the two transports cannot disagree about what a node said.

use crate::error::BankError;
use bytes::{Buf, Bytes, BytesMut};

/// What one command answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// `get`/`gets` of this many keys: any number of VALUE blocks, then END.
    /// The count only sizes buffers (an RDMA reply region); parsing ignores it.
    Values(u32),
    /// set/add/cas/delete/flush_all/version: one line
    Line,
}

/// One parsed reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// (key, value, cas if `gets`)
    Values(Vec<(String, Bytes, Option<u64>)>),
    /// STORED, NOT_STORED, EXISTS, NOT_FOUND, DELETED, OK, VERSION ...
    Line(String),
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

/// A line longer than this cannot be a reply of ours (keys are ≤ 250 bytes).
const MAX_LINE: usize = 4096;

/// The replies of one batch, parsed incrementally.
pub struct BatchParser {
    expect: Vec<Expect>,
    replies: Vec<Reply>,
    /// values of the `get` reply in progress
    vals: Vec<(String, Bytes, Option<u64>)>,
}

impl BatchParser {
    pub fn new(expect: Vec<Expect>) -> BatchParser {
        BatchParser { replies: Vec::with_capacity(expect.len()), expect, vals: Vec::new() }
    }

    /// Consume every complete reply item at the front of `buf`. `Ok(true)`:
    /// the batch is fully answered (bytes after it stay in `buf`, they belong
    /// to the next batch); `Ok(false)`: more bytes are needed.
    pub fn feed<B: ReplyBuf>(&mut self, buf: &mut B, addr: &str) -> Result<bool, BankError> {
        while let Some(&e) = self.expect.get(self.replies.len()) {
            let data: &[u8] = buf;
            let Some(i) = data.windows(2).position(|w| w == b"\r\n") else {
                if data.len() > MAX_LINE {
                    return Err(BankError::Protocol(addr.into(), "reply line too long".into()));
                }
                return Ok(false);
            };
            let line = std::str::from_utf8(&data[..i])
                .map_err(|_| BankError::Protocol(addr.into(), "reply line is not UTF-8".into()))?;
            match e {
                // an error line is in sync (one line): report it, keep the connection
                Expect::Line => {
                    let l = line.to_string();
                    buf.advance(i + 2);
                    self.replies.push(Reply::Line(l));
                }
                Expect::Values(_) if line == "END" => {
                    buf.advance(i + 2);
                    self.replies.push(Reply::Values(std::mem::take(&mut self.vals)));
                }
                Expect::Values(_) => {
                    let (key, len, cas) = value_header(line, addr)?;
                    if data.len() < i + 2 + len + 2 {
                        return Ok(false); // the header is parsed again with the data
                    }
                    let crlf = &data[i + 2 + len..i + 2 + len + 2] == b"\r\n";
                    buf.advance(i + 2);
                    let v = buf.take(len);
                    if !crlf {
                        return Err(BankError::Protocol(addr.into(), "value not followed by CRLF".into()));
                    }
                    buf.advance(2);
                    self.vals.push((key, v, cas));
                }
            }
        }
        Ok(true)
    }

    pub fn finish(self) -> Vec<Reply> {
        self.replies
    }
}

/// `VALUE <key> <flags> <bytes> [<cas>]` → (key, bytes, cas).
fn value_header(l: &str, addr: &str) -> Result<(String, usize, Option<u64>), BankError> {
    let mut it = l.split(' ');
    let (Some("VALUE"), Some(key), Some(_flags), Some(len)) = (it.next(), it.next(), it.next(), it.next()) else {
        if l.starts_with("SERVER_ERROR") || l.starts_with("CLIENT_ERROR") || l == "ERROR" {
            return Err(BankError::Server(addr.into(), l.into()));
        }
        return Err(BankError::Protocol(addr.into(), format!("unexpected reply {l:?}")));
    };
    let len = len.parse().map_err(|_| BankError::Protocol(addr.into(), format!("bad length in {l:?}")))?;
    Ok((key.to_string(), len, it.next().and_then(|c| c.parse().ok())))
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

    #[test]
    fn values_and_lines() {
        let r = parse_all(b"STORED\r\nVALUE a 0 3 7\r\na\r\n\r\nVALUE b 0 0\r\n\r\nEND\r\n", vec![Expect::Line, Expect::Values(2)]);
        assert_eq!(
            r.unwrap(),
            vec![
                Reply::Line("STORED".into()),
                Reply::Values(vec![("a".into(), Bytes::from_static(b"a\r\n"), Some(7)), ("b".into(), Bytes::new(), None)])
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
    fn garbage_and_errors() {
        assert!(matches!(parse_all(b"SERVER_ERROR oom\r\n", vec![Expect::Values(1)]), Err(BankError::Server(..))));
        assert!(matches!(parse_all(b"HELLO\r\n", vec![Expect::Values(1)]), Err(BankError::Protocol(..))));
        assert!(matches!(parse_all(b"VALUE k 0 2\r\nabXX", vec![Expect::Values(1)]), Err(BankError::Protocol(..))));
        assert_eq!(parse_all(b"ERROR\r\n", vec![Expect::Line]).unwrap(), vec![Reply::Line("ERROR".into())]);
    }
}
