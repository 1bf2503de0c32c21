//! The commonest request line, `get <key>`, recognized without the general
//! parser's allocations.
//!
//! `cache_proto::text::parse` tokenizes every line into a `Vec` and copies
//! a get's keys into another: two `malloc`/`free` pairs per request, about
//! 1.5 % of the node's CPU on a 90 %-get single-key load, where memcached
//! allocates nothing (issue 14's profile, docs/benchmarks/archive/cache-node-vs-memcached.md). A line that is
//! exactly `get`, one space and one key of at most [`MAX_KEY_LEN`] bytes
//! with no further space tokenizes to `["get", key]` in memcached and in
//! `parse` alike, so it is answered here with the same `exec_get`; any
//! other line (`gets`, two spaces, several keys, a long key, no newline
//! yet) goes to `parse` as before. The line is cut by the parser's own
//! [`split_line`], so its ending, NUL and length rules are the parser's.

use cache_proto::text::split_line;
use cache_proto::MAX_KEY_LEN;

/// `Some((key, bytes used))` when `input` starts with a complete
/// `get <key>` line of that shape.
#[inline]
pub fn single_get(input: &[u8]) -> Option<(&[u8], usize)> {
    if !input.starts_with(b"get ") {
        return None;
    }
    let (line, used) = split_line(input).ok()??;
    let key = line.get(4..)?;
    (!key.is_empty() && key.len() <= MAX_KEY_LEN && !key.contains(&b' ')).then_some((key, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cache_proto::text::{parse, Command, Frame};
    use cache_proto::Parse;

    /// What the general parser makes of `input`: the keys of a plain get.
    fn parsed(input: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
        match parse(input, 1 << 20) {
            Parse::Done(Frame::Request { cmd: Command::Get { keys, cas: false, touch: None }, .. }, used) => {
                Some((keys.iter().map(|k| k.to_vec()).collect(), used))
            }
            _ => None,
        }
    }

    #[test]
    fn agrees_with_the_parser_where_it_answers() {
        let long = [b"get ".as_slice(), &[b'k'; MAX_KEY_LEN], b"\r\n"].concat();
        let too_long = [b"get ".as_slice(), &[b'k'; MAX_KEY_LEN + 1], b"\r\n"].concat();
        let cases: [&[u8]; 16] = [
            b"get foo\r\n",
            b"get foo\n",
            b"get foo\r\r\n",
            b"get f\0oo\r\n",
            b"get foo\r\nget bar\r\n",
            b"get foo",
            b"get \r\n",
            b"get  foo\r\n",
            b"get foo \r\n",
            b"get foo bar\r\n",
            b"gets foo\r\n",
            b"GET foo\r\n",
            b"get\r\n",
            b"get \0\r\n",
            &long,
            &too_long,
        ];
        // where it declines, the general parser answers (whatever it answers)
        for input in cases {
            if let Some((key, used)) = single_get(input) {
                assert_eq!(parsed(input), Some((vec![key.to_vec()], used)), "{:?}", String::from_utf8_lossy(input));
            }
        }
        assert!(single_get(b"get foo\r\n").is_some());
        assert!(single_get(&long).is_some());
        assert!(single_get(&too_long).is_none());
        assert!(single_get(b"get foo bar\r\n").is_none());
        assert!(single_get(b"get foo").is_none());
    }

    proptest::proptest! {
        /// Lines of spaces, line ends, NULs and letters after `get`.
        #[test]
        fn never_disagrees(tail in proptest::collection::vec(proptest::sample::select(b" \r\n\0ab".to_vec()), 0..12)) {
            let input = [b"get ".as_slice(), &tail].concat();
            if let Some((key, used)) = single_get(&input) {
                proptest::prop_assert_eq!(parsed(&input), Some((vec![key.to_vec()], used)));
            }
        }
    }
}
