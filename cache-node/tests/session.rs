//! The socket-free core: output is produced in bounded slices, and no input
//! (random or mutated requests, any protocol) makes it panic.

mod common;

use bytes::BytesMut;
use cache_node::{Config, Node, Progress, Session, OUT_HIGH_WATER};
use proptest::prelude::*;
use std::sync::Arc;

fn node() -> Arc<Node> {
    Arc::new(Node::new(Config { memory_bytes: 4 << 20, ..Config::local() }))
}

#[test]
fn output_is_produced_in_bounded_slices() {
    let n = node();
    let mut s = Session::new(n);
    let big = "v".repeat(100_000);
    let mut input = BytesMut::from(format!("set big 0 0 {}\r\n{big}\r\n{}", big.len(), "get big\r\n".repeat(40)).as_bytes());
    let mut out = Vec::new();
    let mut values = 0;
    let mut rounds = 0;
    loop {
        assert_eq!(s.process(&mut input, &mut out), Progress::Continue);
        assert!(out.len() < OUT_HIGH_WATER + 200_000, "one round produced {} bytes", out.len());
        values += out.windows(10).filter(|w| w == b"VALUE big ").count();
        out.clear();
        rounds += 1;
        if !s.pending() {
            break;
        }
    }
    assert_eq!(values, 40);
    assert!(rounds >= 4, "expected several bounded rounds, got {rounds}");
    assert!(input.is_empty());
}

#[test]
fn pipelined_large_gets_over_tcp() {
    let node = common::TestNode::local();
    let big = "w".repeat(100_000);
    let req = format!("set big 0 0 {}\r\n{big}\r\n{}version\r\n", big.len(), "get big\r\n".repeat(50));
    let r = common::exchange(node.addr, req.as_bytes(), b"VERSION 1.6.18\r\n");
    assert_eq!(r.windows(10).filter(|w| w == b"VALUE big ").count(), 50);
}

fn request() -> impl Strategy<Value = Vec<u8>> {
    let key = prop::sample::select(vec!["a", "b", "n", "k1"]);
    prop_oneof![
        (key.clone(), 0usize..40).prop_map(|(k, n)| format!("set {k} 0 0 {n}\r\n{}\r\n", "1".repeat(n)).into_bytes()),
        key.clone().prop_map(|k| format!("get {k} a b\r\n").into_bytes()),
        (key.clone(), any::<u64>()).prop_map(|(k, d)| format!("incr {k} {d}\r\ndecr {k} {d}\r\n").into_bytes()),
        key.clone().prop_map(|k| format!("append {k} 0 0 2\r\n99\r\nprepend {k} 0 0 1\r\n-\r\n").into_bytes()),
        key.clone().prop_map(|k| format!("mg {k} v c f t s k h l O1 T9\r\nma {k} N0 J5 D3 v\r\nmd {k} I T3\r\nmg {k} v\r\n").into_bytes()),
        key.clone().prop_map(|k| format!("ms {k} 2 MA T-1\r\nzz\r\nme {k}\r\ngats 5 {k}\r\ntouch {k} -1\r\n").into_bytes()),
        Just(b"flush_all 1\r\nstats\r\nstats items\r\nstats slabs\r\nstats settings\r\nversion\r\n".to_vec()),
        (key, any::<u64>(), any::<u64>()).prop_map(|(k, d, i)| {
            let mut e = d.to_be_bytes().to_vec();
            e.extend_from_slice(&i.to_be_bytes());
            e.extend_from_slice(&0u32.to_be_bytes());
            let mut v = cache_proto::binary::Request::encode(0x05, &e, k.as_bytes(), &[], 1, 0);
            v.extend(cache_proto::binary::Request::encode(0x1d, &[0, 0, 0, 5], k.as_bytes(), &[], 2, 0));
            v.extend(cache_proto::binary::Request::encode(0x10, &[], b"", &[], 3, 0));
            v
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// Valid-looking sessions with random bytes flipped, fed in random
    /// chunks: the session never panics and never holds more than it must.
    #[test]
    fn mutated_sessions_never_panic(
        reqs in proptest::collection::vec(request(), 1..8),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        chunk in 1usize..64,
        binary_first in any::<bool>(),
    ) {
        let mut data: Vec<u8> = reqs.concat();
        if binary_first { data.insert(0, 0x80); }
        for (at, b) in flips {
            let n = data.len();
            data[at % n] = b;
        }
        let mut s = Session::new(node());
        let mut input = BytesMut::new();
        let mut out = Vec::new();
        for c in data.chunks(chunk) {
            input.extend_from_slice(c);
            loop {
                let p = s.process(&mut input, &mut out);
                out.clear();
                if p == Progress::Close { return Ok(()); }
                if !s.pending() { break; }
            }
            prop_assert!(input.len() <= data.len());
        }
    }
}
