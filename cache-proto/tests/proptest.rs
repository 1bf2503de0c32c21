//! Property tests: every request the client half composes parses back to
//! itself with the server half (see also `round_trip.rs`), the
//! parsers give the same frames however a pipeline is split (at every byte
//! boundary), and arbitrary or mutated bytes never break the parsers'
//! invariants (this doubles as the stable-toolchain stand-in for the
//! cargo-fuzz target in `fuzz/`).

use std::borrow::Cow;

use cache_proto::binary::{self, op, Request};
use cache_proto::meta::{Kind, MetaCommand};
use cache_proto::text::{self, Command, Frame, StoreOp};
use cache_proto::{client, fuzzing, Parse};
use proptest::prelude::*;

const MAX: usize = 1 << 20;

fn key() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(0x21u8..0x7f, 1..=250)
}

fn small_key() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(0x21u8..0x7f, 1..12)
}

#[derive(Debug, Clone)]
enum Req {
    Get(Vec<Vec<u8>>, bool, Option<i32>),
    Store(StoreOp, Vec<u8>, u32, i32, Vec<u8>, u64, bool),
    Delete(Vec<u8>, bool),
    Arith(bool, Vec<u8>, u64, bool),
    Touch(Vec<u8>, i32, bool),
    Flush(i32, bool),
    Meta(Kind, Vec<u8>, Vec<(u8, Vec<u8>)>, Vec<u8>),
}

fn store_op() -> impl Strategy<Value = StoreOp> {
    prop_oneof![
        Just(StoreOp::Set),
        Just(StoreOp::Add),
        Just(StoreOp::Replace),
        Just(StoreOp::Append),
        Just(StoreOp::Prepend),
        Just(StoreOp::Cas)
    ]
}

fn meta_flag() -> impl Strategy<Value = (u8, Vec<u8>)> {
    prop_oneof![
        prop::sample::select(vec![b'v', b'k', b's', b't', b'f', b'c', b'q', b'h', b'l', b'u']).prop_map(|f| (f, vec![])),
        (any::<i32>()).prop_map(|n| (b'T', n.to_string().into_bytes())),
        proptest::collection::vec(0x21u8..0x7f, 0..32).prop_map(|t| (b'O', t)),
    ]
}

fn req(k: impl Strategy<Value = Vec<u8>> + Clone + 'static) -> impl Strategy<Value = Req> {
    let data = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        (proptest::collection::vec(k.clone(), 1..5), any::<bool>(), proptest::option::of(any::<i32>()))
            .prop_map(|(k, c, t)| Req::Get(k, c, t)),
        (store_op(), k.clone(), any::<u32>(), any::<i32>(), data.clone(), any::<u64>(), any::<bool>())
            .prop_map(|(o, k, f, e, d, c, n)| Req::Store(o, k, f, e, d, c, n)),
        (k.clone(), any::<bool>()).prop_map(|(k, n)| Req::Delete(k, n)),
        (any::<bool>(), k.clone(), any::<u64>(), any::<bool>()).prop_map(|(i, k, d, n)| Req::Arith(i, k, d, n)),
        (k.clone(), any::<i32>(), any::<bool>()).prop_map(|(k, e, n)| Req::Touch(k, e, n)),
        (any::<i32>(), any::<bool>()).prop_map(|(e, n)| Req::Flush(e, n)),
        (
            prop::sample::select(vec![Kind::Get, Kind::Set, Kind::Delete, Kind::Arith]),
            k,
            proptest::collection::btree_map(any::<u8>(), meta_flag(), 0..4),
            data
        )
            .prop_map(|(kind, k, f, d)| {
                // one flag per letter, as memcached requires
                let mut seen = std::collections::BTreeMap::new();
                for (_, (c, t)) in f {
                    seen.insert(c, t);
                }
                Req::Meta(kind, k, seen.into_iter().collect(), if kind == Kind::Set { d } else { vec![] })
            }),
    ]
}

fn command(r: &Req) -> (Command<'_>, &[u8]) {
    match r {
        Req::Get(keys, cas, touch) => {
            (Command::Get { keys: keys.iter().map(|k| k.as_slice()).collect(), cas: *cas, touch: *touch }, &[])
        }
        Req::Store(op, key, flags, exptime, data, cas, noreply) => (
            Command::Store {
                op: *op,
                key,
                flags: *flags,
                exptime: *exptime,
                len: data.len(),
                cas: if *op == StoreOp::Cas { *cas } else { 0 },
                noreply: *noreply,
            },
            data,
        ),
        Req::Delete(key, noreply) => (Command::Delete { key, noreply: *noreply }, &[]),
        Req::Arith(incr, key, delta, noreply) => (Command::Arith { incr: *incr, key, delta: *delta, noreply: *noreply }, &[]),
        Req::Touch(key, exptime, noreply) => (Command::Touch { key, exptime: *exptime, noreply: *noreply }, &[]),
        Req::Flush(delay, noreply) => (Command::FlushAll { delay: *delay, noreply: *noreply }, &[]),
        Req::Meta(kind, key, flags, data) => (
            Command::Meta(MetaCommand {
                kind: *kind,
                key: Cow::Borrowed(key),
                datalen: data.len(),
                flags: flags.iter().map(|(f, t)| (*f, t.as_slice())).collect(),
            }),
            data,
        ),
    }
}

/// The request as the client half composes it.
fn encode(r: &Req) -> Vec<u8> {
    let (cmd, data) = command(r);
    let mut out = Vec::new();
    client::request(&mut out, &cmd, data);
    out
}

fn bin_req() -> impl Strategy<Value = Vec<u8>> {
    let k = small_key();
    let v = proptest::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        (k.clone(), any::<u32>()).prop_map(|(k, o)| Request::encode(op::GET, &[], &k, &[], o, 0)),
        (k.clone(), any::<u32>()).prop_map(|(k, o)| Request::encode(op::GETKQ, &[], &k, &[], o, 0)),
        (k.clone(), v, any::<[u8; 8]>(), any::<u64>()).prop_map(|(k, v, e, c)| Request::encode(op::SET, &e, &k, &v, 1, c)),
        (k.clone(), any::<[u8; 20]>()).prop_map(|(k, e)| Request::encode(op::INCREMENT, &e, &k, &[], 2, 0)),
        k.clone().prop_map(|k| Request::encode(op::DELETE, &[], &k, &[], 3, 0)),
        Just(Request::encode(op::NOOP, &[], &[], &[], 4, 0)),
        (k, any::<[u8; 4]>()).prop_map(|(k, e)| Request::encode(op::GAT, &e, &k, &[], 5, 0)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn text_and_meta_round_trip(r in req(key())) {
        let bytes = encode(&r);
        let (cmd, data) = command(&r);
        match text::parse(&bytes, MAX) {
            Parse::Done(Frame::Request { cmd: got, data: d }, used) => {
                prop_assert_eq!(used, bytes.len());
                prop_assert_eq!(got, cmd);
                prop_assert_eq!(d, data);
            }
            other => prop_assert!(false, "{:?} parsed as {:?}", String::from_utf8_lossy(&bytes), other),
        }
    }

    #[test]
    fn binary_round_trip(bytes in bin_req()) {
        match binary::parse(&bytes, MAX) {
            Parse::Done(binary::Frame::Request(r), used) => {
                prop_assert_eq!(used, bytes.len());
                let again = Request::encode(r.header.opcode, r.extras, r.key, r.value, r.header.opaque, r.header.cas);
                prop_assert_eq!(again, bytes);
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// A pipeline split at every byte boundary parses to the same frames.
    #[test]
    fn text_pipeline_split_anywhere(rs in proptest::collection::vec(req(small_key()), 1..6)) {
        let bytes: Vec<u8> = rs.iter().flat_map(encode).collect();
        let whole = fuzzing::frames(&[&bytes], MAX);
        prop_assert_eq!(whole.len(), rs.len());
        for i in 0..=bytes.len() {
            prop_assert_eq!(&fuzzing::frames(&[&bytes[..i], &bytes[i..]], MAX), &whole);
        }
    }

    #[test]
    fn binary_pipeline_split_anywhere(rs in proptest::collection::vec(bin_req(), 1..6)) {
        let bytes: Vec<u8> = rs.concat();
        let whole = fuzzing::frames(&[&bytes], MAX);
        prop_assert_eq!(whole.len(), rs.len());
        for i in 0..=bytes.len() {
            prop_assert_eq!(&fuzzing::frames(&[&bytes[..i], &bytes[i..]], MAX), &whole);
        }
    }
}

proptest! {
    // The "fuzzing on stable" corpus: many random and mutated inputs.
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_keep_invariants(data in proptest::collection::vec(any::<u8>(), 0..600), split in any::<usize>()) {
        fuzzing::check(&data, split % (data.len() + 1), 1024);
    }

    #[test]
    fn mutated_requests_keep_invariants(
        rs in proptest::collection::vec(prop_oneof![req(small_key()).prop_map(|r| encode(&r)), bin_req()], 1..4),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        split in any::<usize>(),
    ) {
        let mut data: Vec<u8> = rs.concat();
        for (at, b) in flips {
            let n = data.len();
            data[at % n] = b;
        }
        fuzzing::check(&data, split % (data.len() + 1), 1024);
    }
}

#[test]
fn hand_picked_errors() {
    let e = |s: &[u8]| match text::parse(s, MAX) {
        Parse::Done(Frame::Error { reply, .. }, _) => reply,
        other => panic!("{other:?}"),
    };
    assert_eq!(e(b"bogus\r\n"), "ERROR");
    assert_eq!(e(b"set a 0 0 -1\r\n"), text::BAD_FORMAT);
    assert_eq!(e(b"set a 0 0 1\r\nab\r\n"), text::BAD_CHUNK);
    assert_eq!(e(b"incr a x\r\n"), text::BAD_DELTA);
    assert_eq!(e(b"touch a x\r\n"), text::BAD_EXPTIME);
    assert_eq!(e(b"mg a Z\r\n"), "CLIENT_ERROR invalid flag");
    let long = format!("get {}\r\n", "k".repeat(251));
    assert_eq!(e(long.as_bytes()), text::BAD_FORMAT);
    assert_eq!(text::parse(&[b'x'; 3000], MAX), Parse::Close);
    assert_eq!(text::parse(b"get a", MAX), Parse::Incomplete);
    assert!(matches!(text::parse(b"set a 0 0 5000000\r\n", MAX), Parse::Done(Frame::TooLarge { swallow: 5000002, .. }, 19)));
}
