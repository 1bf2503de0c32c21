//! The invariants the fuzz targets (`fuzz/`) and the randomized tests check
//! on arbitrary input: parsing never panics, never claims more bytes than it
//! was given, and gives the same frames however the input is split. For
//! the client's response parser also: every slice of a response lies in the
//! bytes it used, and composing the response again gives bytes that parse
//! back to it.

use crate::client::{self, Parsed};
use crate::{binary, text, Parse};

/// Runs the parser for `data`'s protocol (first byte decides, like the node)
/// over `data` at once and in two pieces split at `split`; panics on any
/// broken invariant. `max_value` as in the node (e.g. 1 MiB).
pub fn check(data: &[u8], split: usize, max_value: usize) {
    let whole = frames(&[data], max_value);
    let split = split.min(data.len());
    let parts = frames(&[&data[..split], &data[split..]], max_value);
    assert_eq!(whole, parts, "frames depend on how the input is split at {split}");
}

/// Feeds `chunks` one after the other into a buffer the way a connection
/// does, parsing all complete frames after each; returns their debug forms.
pub fn frames(chunks: &[&[u8]], max_value: usize) -> Vec<String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut swallow = 0usize;
    let binary = chunks.iter().find(|c| !c.is_empty()).is_some_and(|c| c[0] == binary::REQ_MAGIC);
    'feed: for c in chunks {
        buf.extend_from_slice(c);
        loop {
            let n = swallow.min(buf.len());
            buf.drain(..n);
            swallow -= n;
            if buf.is_empty() {
                continue 'feed;
            }
            let (desc, used, skip) = if binary {
                match binary::parse(&buf, max_value) {
                    Parse::Incomplete => continue 'feed,
                    Parse::Close => {
                        out.push("close".into());
                        break 'feed;
                    }
                    Parse::Done(f, used) => {
                        let skip = match &f {
                            binary::Frame::Error { swallow, close: true, .. } => {
                                out.push(format!("{f:?}"));
                                let _ = swallow;
                                break 'feed;
                            }
                            binary::Frame::Error { swallow, .. } | binary::Frame::TooLarge { swallow, .. } => *swallow,
                            _ => 0,
                        };
                        (format!("{f:?}"), used, skip)
                    }
                }
            } else {
                match text::parse(&buf, max_value) {
                    Parse::Incomplete => continue 'feed,
                    Parse::Close => {
                        out.push("close".into());
                        break 'feed;
                    }
                    Parse::Done(f, used) => {
                        let skip = match &f {
                            text::Frame::Error { swallow, .. } | text::Frame::TooLarge { swallow, .. } => *swallow,
                            _ => 0,
                        };
                        (format!("{f:?}"), used, skip)
                    }
                }
            };
            assert!(used > 0 && used <= buf.len(), "used {used} of {}", buf.len());
            out.push(desc);
            buf.drain(..used);
            swallow = skip;
        }
    }
    out
}

/// [`check`] for a server's output, read by the client's response parser.
pub fn check_responses(data: &[u8], split: usize, max_value: usize) {
    let whole = responses(&[data], max_value);
    let split = split.min(data.len());
    let parts = responses(&[&data[..split], &data[split..]], max_value);
    assert_eq!(whole, parts, "responses depend on how the input is split at {split}");
}

/// Feeds `chunks` the way a connection does and parses every complete
/// response after each; returns their debug forms (the last may be the
/// reason the input is invalid).
pub fn responses(chunks: &[&[u8]], max_value: usize) -> Vec<String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match client::parse(&buf, max_value) {
                Parsed::Incomplete => break,
                Parsed::Invalid(why) => {
                    out.push(format!("invalid: {why}"));
                    return out;
                }
                Parsed::Done(r, used) => {
                    assert!(used > 0 && used <= buf.len(), "used {used} of {}", buf.len());
                    let within = buf.as_ptr() as usize..buf.as_ptr() as usize + used;
                    // map, for its side effect: visit every slice
                    let _ = r.clone().map(|s| {
                        let at = s.as_ptr() as usize;
                        assert!(within.contains(&at) || (s.is_empty() && at == within.end), "a slice outside the input");
                        assert!(at + s.len() <= within.end, "a slice past the used bytes");
                    });
                    let mut again = Vec::new();
                    r.encode(&mut again);
                    match client::parse(&again, usize::MAX) {
                        Parsed::Done(r2, n) => {
                            assert_eq!(n, again.len(), "{again:?}");
                            assert_eq!(r2, r, "composed as {again:?}");
                        }
                        other => panic!("{r:?} composed as {again:?} parses as {other:?}"),
                    }
                    out.push(format!("{r:?}"));
                    buf.drain(..used);
                }
            }
        }
    }
    out
}
