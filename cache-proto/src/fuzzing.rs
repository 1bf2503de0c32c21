//! The invariants the fuzz target (`fuzz/`) and the randomized tests check
//! on arbitrary input: parsing never panics, never claims more bytes than it
//! was given, and gives the same frames however the input is split.

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
