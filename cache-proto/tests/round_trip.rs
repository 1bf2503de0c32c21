//! Client against server, both directions: what the client half composes,
//! the server half parses into the same commands; what the server composes
//! (with `Response::encode`, as cache-node does), the client half parses
//! into the same responses, however the bytes are split. Mutated server
//! output keeps the response parser's invariants (the stable-toolchain
//! stand-in for `fuzz/fuzz_targets/parse_response.rs`).

use cache_proto::client::{self, Parsed, MULTI_GET_LINE};
use cache_proto::response::{Response, Status, Value};
use cache_proto::text::{self, reply, Command, Frame, StoreOp};
use cache_proto::{fuzzing, Parse};
use proptest::prelude::*;

const MAX: usize = 1 << 20;

fn key() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(0x21u8..0x7f, 1..=250)
}

fn data() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(any::<u8>(), 0..300)
}

/// Free text of a message line (no CR or LF).
fn text(n: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(0x20u8..0x7f, 0..n)
}

// ---- requests: client composes, server parses

/// What the bank sends (plus noreply and delays, which it could).
#[derive(Debug, Clone)]
enum Sent {
    Store(StoreOp, Vec<u8>, u32, i32, Vec<u8>, u64, bool),
    Delete(Vec<u8>, bool),
    FlushAll(i32, bool),
    Version,
    MultiGet(bool, Vec<Vec<u8>>),
}

fn sent() -> impl Strategy<Value = Sent> {
    let op = prop::sample::select(vec![StoreOp::Set, StoreOp::Add, StoreOp::Cas, StoreOp::Replace]);
    prop_oneof![
        (op, key(), any::<u32>(), any::<i32>(), data(), any::<u64>(), any::<bool>())
            .prop_map(|(o, k, f, e, d, c, n)| Sent::Store(o, k, f, e, d, c, n)),
        (key(), any::<bool>()).prop_map(|(k, n)| Sent::Delete(k, n)),
        (prop_oneof![Just(0), any::<i32>()], any::<bool>()).prop_map(|(d, n)| Sent::FlushAll(d, n)),
        Just(Sent::Version),
        (any::<bool>(), proptest::collection::vec(key(), 1..40)).prop_map(|(c, k)| Sent::MultiGet(c, k)),
    ]
}

/// Composes `s`; returns how many request lines it made.
fn compose(s: &Sent, out: &mut Vec<u8>) -> usize {
    match s {
        Sent::Store(op, key, flags, exptime, data, cas, noreply) => {
            let cmd = Command::Store {
                op: *op,
                key,
                flags: *flags,
                exptime: *exptime,
                len: data.len(),
                cas: *cas,
                noreply: *noreply,
            };
            client::request(out, &cmd, data);
            1
        }
        Sent::Delete(key, noreply) => {
            client::request(out, &Command::Delete { key, noreply: *noreply }, &[]);
            1
        }
        Sent::FlushAll(delay, noreply) => {
            client::request(out, &Command::FlushAll { delay: *delay, noreply: *noreply }, &[]);
            1
        }
        Sent::Version => {
            client::request(out, &Command::Version, &[]);
            1
        }
        Sent::MultiGet(cas, keys) => {
            let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            client::multi_get(out, *cas, &keys).len()
        }
    }
}

/// What the server must have understood from `s`, given its frames.
fn check_understood(s: &Sent, frames: &[(Command<'_>, &[u8])]) -> Result<(), TestCaseError> {
    let one = |want: Command<'_>, data: &[u8]| -> Result<(), TestCaseError> {
        prop_assert_eq!(frames.len(), 1);
        prop_assert_eq!(&frames[0].0, &want);
        prop_assert_eq!(frames[0].1, data);
        Ok(())
    };
    match s {
        Sent::Store(op, key, flags, exptime, data, cas, noreply) => one(
            Command::Store {
                op: *op,
                key,
                flags: *flags,
                exptime: *exptime,
                len: data.len(),
                // only `cas` carries its unique on the wire
                cas: if *op == StoreOp::Cas { *cas } else { 0 },
                noreply: *noreply,
            },
            data,
        ),
        Sent::Delete(key, noreply) => one(Command::Delete { key, noreply: *noreply }, &[]),
        Sent::FlushAll(delay, noreply) => one(Command::FlushAll { delay: *delay, noreply: *noreply }, &[]),
        Sent::Version => one(Command::Version, &[]),
        Sent::MultiGet(cas, keys) => {
            let mut asked: Vec<&[u8]> = Vec::new();
            for (cmd, _) in frames {
                let Command::Get { keys: line, cas: c, touch: None } = cmd else {
                    return Err(TestCaseError::fail(format!("{cmd:?}")));
                };
                prop_assert_eq!(c, cas);
                asked.extend(line);
            }
            prop_assert_eq!(asked, keys.iter().map(|k| k.as_slice()).collect::<Vec<_>>());
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A pipeline the client composes is, frame by frame, what the server parses.
    #[test]
    fn requests_client_to_server(pipeline in proptest::collection::vec(sent(), 1..8)) {
        let mut bytes = Vec::new();
        let lines: Vec<usize> = pipeline.iter().map(|s| compose(s, &mut bytes)).collect();
        let mut frames = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match text::parse(&bytes[at..], MAX) {
                Parse::Done(Frame::Request { cmd, data }, used) => {
                    if matches!(cmd, Command::Get { .. }) {
                        let line = bytes[at..at + used].len() - 2;
                        let one_key = matches!(&cmd, Command::Get { keys, .. } if keys.len() == 1);
                        prop_assert!(line <= MULTI_GET_LINE || one_key, "a {line}-byte get line");
                    }
                    frames.push((cmd, data));
                    at += used;
                }
                other => prop_assert!(false, "{:?} at {}: {:?}", String::from_utf8_lossy(&bytes[at..]), at, other),
            }
        }
        prop_assert_eq!(frames.len(), lines.iter().sum::<usize>());
        let mut rest = frames.as_slice();
        for (s, n) in pipeline.iter().zip(lines) {
            check_understood(s, &rest[..n])?;
            rest = &rest[n..];
        }
    }
}

// ---- responses: server composes, client parses

fn response() -> impl Strategy<Value = Response<Vec<u8>>> {
    prop_oneof![
        (key(), any::<u32>(), data(), proptest::option::of(any::<u64>()))
            .prop_map(|(key, flags, data, cas)| Response::Value(Value { key, flags, data, cas })),
        prop::sample::select(Status::ALL.to_vec()).prop_map(Response::Status),
        any::<u64>().prop_map(Response::Number),
        text(20).prop_map(Response::Version),
        (proptest::collection::vec(0x21u8..0x7f, 1..30), text(30)).prop_map(|(name, value)| Response::Stat { name, value }),
        text(60).prop_map(Response::Error),
        text(60).prop_map(Response::ClientError),
        text(60).prop_map(Response::ServerError),
    ]
}

fn encoded(rs: &[Response<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rs {
        r.encode(&mut out);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn responses_server_to_client(r in response()) {
        let bytes = encoded(std::slice::from_ref(&r));
        match client::parse(&bytes, MAX) {
            Parsed::Done(got, used) => {
                prop_assert_eq!(used, bytes.len());
                prop_assert_eq!(got.map(<[u8]>::to_vec), r);
            }
            other => prop_assert!(false, "{:?} parsed as {:?}", String::from_utf8_lossy(&bytes), other),
        }
    }

    /// A pipeline of responses split at every byte boundary parses the same.
    #[test]
    fn response_pipeline_split_anywhere(rs in proptest::collection::vec(response(), 1..6)) {
        let bytes = encoded(&rs);
        let whole = fuzzing::responses(&[&bytes], MAX);
        prop_assert_eq!(whole.len(), rs.len());
        for i in 0..=bytes.len() {
            prop_assert_eq!(&fuzzing::responses(&[&bytes[..i], &bytes[i..]], MAX), &whole);
        }
    }
}

proptest! {
    // many random and mutated server outputs
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn random_output_keeps_invariants(data in proptest::collection::vec(any::<u8>(), 0..600), split in any::<usize>()) {
        fuzzing::check_responses(&data, split % (data.len() + 1), 1024);
    }

    #[test]
    fn mutated_output_keeps_invariants(
        rs in proptest::collection::vec(response(), 1..4),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        split in any::<usize>(),
    ) {
        let mut data = encoded(&rs);
        for (at, b) in flips {
            let n = data.len();
            data[at % n] = b;
        }
        fuzzing::check_responses(&data, split % (data.len() + 1), 1024);
    }
}

/// The exact bytes memcached answers with: cache-node composes them through
/// `Response`, so this pins its replies byte for byte.
#[test]
fn memcached_bytes() {
    let enc = |r: Response<&[u8]>| {
        let mut out = Vec::new();
        r.encode(&mut out);
        String::from_utf8(out).unwrap()
    };
    let words = ["STORED", "NOT_STORED", "EXISTS", "NOT_FOUND", "DELETED", "TOUCHED", "OK", "END"];
    for (s, w) in Status::ALL.into_iter().zip(words) {
        assert_eq!(enc(Response::Status(s)), format!("{w}\r\n"));
    }
    assert_eq!(enc(Response::Number(42)), "42\r\n");
    assert_eq!(enc(Response::Version(b"1.6.18")), "VERSION 1.6.18\r\n");
    assert_eq!(enc(Response::Error(b"")), "ERROR\r\n");
    assert_eq!(enc(Response::Error(b"shutdown not enabled")), "ERROR: shutdown not enabled\r\n");
    assert_eq!(enc(Response::ServerError(b"out of memory writing get response")), "SERVER_ERROR out of memory writing get response\r\n");
    let v = Value { key: &b"k"[..], flags: 3, data: &b"ab"[..], cas: Some(9) };
    assert_eq!(enc(Response::Value(v.clone())), "VALUE k 3 2 9\r\nab\r\n");
    assert_eq!(enc(Response::Value(Value { cas: None, ..v })), "VALUE k 3 2\r\nab\r\n");
    let mut stat = Vec::new();
    reply::stat(&mut stat, "curr_items", 5);
    assert_eq!(client::parse(&stat, MAX), Parsed::Done(Response::Stat { name: &b"curr_items"[..], value: &b"5"[..] }, stat.len()));
}

/// Every error line the server half answers a bad request with is, to the
/// client, the error it is.
#[test]
fn the_servers_error_lines_parse_as_errors() {
    let lines = [
        text::ERROR,
        text::BAD_FORMAT,
        text::BAD_CHUNK,
        text::BAD_EXPTIME,
        text::BAD_DELTA,
        text::TOO_LARGE,
        text::NON_NUMERIC,
        text::DELETE_USAGE,
        "CLIENT_ERROR invalid flag",
    ];
    for l in lines {
        let mut out = Vec::new();
        reply::line(&mut out, l);
        let Parsed::Done(r, used) = client::parse(&out, MAX) else { panic!("{l}") };
        assert_eq!(used, out.len());
        assert!(r.is_error(), "{l} parsed as {r:?}");
        assert_eq!(r.to_string(), l, "the line reads back as it was");
    }
}
