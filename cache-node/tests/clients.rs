//! The node against an independent client (the `memcache` crate): text,
//! binary and meta protocols, plus memory limit, expiry, -c and metrics.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use cache_node::Config;
use common::{exchange, read_until, TestNode};

/// `stats` over a raw connection (the memcache crate's text-mode stats parser is broken).
fn raw_stats(addr: std::net::SocketAddr) -> std::collections::HashMap<String, String> {
    let r = exchange(addr, b"stats\r\n", b"END\r\n");
    String::from_utf8(r)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("STAT "))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn exercise(client: &memcache::Client, addr: std::net::SocketAddr) {
    client.flush().unwrap();
    client.set("k", "v1", 0).unwrap();
    assert_eq!(client.get::<String>("k").unwrap().as_deref(), Some("v1"));
    let _ = client.add("k", "x", 0); // text mode maps NOT_STORED to Ok; the value tells
    assert_eq!(client.get::<String>("k").unwrap().as_deref(), Some("v1"), "add must not overwrite");
    client.add("fresh", "f", 0).unwrap();
    client.replace("k", "v2", 0).unwrap();
    let _ = client.replace("missing", "x", 0);
    assert_eq!(client.get::<String>("missing").unwrap(), None, "replace must not create");
    client.append("k", "-tail").unwrap();
    client.prepend("k", "head-").unwrap();
    assert_eq!(client.get::<String>("k").unwrap().as_deref(), Some("head-v2-tail"));

    let got: std::collections::HashMap<String, (Vec<u8>, u32, Option<u64>)> = client.gets(&["k", "fresh", "nope"]).unwrap();
    assert_eq!(got.len(), 2);
    let cas = got["k"].2.expect("gets returns a cas");
    assert!(client.cas("k", "swapped", 0, cas).unwrap());
    assert!(!client.cas("k", "again", 0, cas).unwrap(), "stale cas must fail");
    assert_eq!(client.get::<String>("k").unwrap().as_deref(), Some("swapped"));

    client.set("n", 10u64, 0).unwrap();
    assert_eq!(client.increment("n", 5).unwrap(), 15);
    assert_eq!(client.decrement("n", 100).unwrap(), 0);
    client.set("n", u64::MAX, 0).unwrap();
    assert_eq!(client.increment("n", 2).unwrap(), 1, "incr wraps at 2^64");
    assert!(client.increment("k", 1).is_err(), "incr on a non-number");

    assert!(client.delete("fresh").unwrap());
    assert!(!client.delete("fresh").unwrap());
    assert!(client.touch("k", 100).unwrap());
    assert!(!client.touch("nope", 100).unwrap());

    let big = vec![b'x'; 2 << 20];
    assert!(client.set("big", &big[..], 0).is_err(), "values over -I are refused");
    let fits = vec![b'y'; 1000 * 1000];
    client.set("fits", &fits[..], 0).unwrap();
    assert_eq!(client.get::<Vec<u8>>("fits").unwrap().unwrap().len(), fits.len());

    let s = raw_stats(addr);
    assert!(s["get_hits"].parse::<u64>().unwrap() > 0);
    assert!(s.contains_key("curr_connections") && s.contains_key("evictions") && s.contains_key("bytes"));
}

#[test]
fn text_protocol_with_memcache_crate() {
    let node = TestNode::local();
    exercise(&memcache::Client::connect(node.url_ascii()).unwrap(), node.addr);
}

#[test]
fn binary_protocol_with_memcache_crate() {
    let node = TestNode::local();
    let c = memcache::Client::connect(node.url_binary()).unwrap();
    exercise(&c, node.addr);
    let s = &c.stats().unwrap()[0].1;
    assert!(s["cmd_set"].parse::<u64>().unwrap() > 5, "binary stats: {s:?}");
}

#[test]
fn meta_protocol_with_async_client() {
    let node = TestNode::local();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use memcache::exp::{AsyncMemcache, Ttl};
        let c = AsyncMemcache::connect([node.addr.to_string()]).await.unwrap();
        c.set("a", "alpha", Ttl::NEVER).await.unwrap();
        assert_eq!(c.get::<String>("a").await.unwrap().as_deref(), Some("alpha"));
        assert!(!c.add("a", "x", Ttl::NEVER).await.unwrap());
        assert!(c.add("b", "beta", Ttl::NEVER).await.unwrap());
        c.append("a", b"!", Ttl::NEVER).await.unwrap();
        assert_eq!(c.get::<String>("a").await.unwrap().as_deref(), Some("alpha!"));
        assert_eq!(c.incr("ctr", 3, Ttl::NEVER).await.unwrap(), 3);
        assert_eq!(c.incr("ctr", 4, Ttl::NEVER).await.unwrap(), 7);
        assert_eq!(c.decr("ctr", 10, Ttl::NEVER).await.unwrap(), 0);
        c.delete("a").await.unwrap();
        assert_eq!(c.get::<String>("a").await.unwrap(), None);
        let many = c.get_many::<String, _>(["b", "a", "ctr"]).await.unwrap();
        assert_eq!(many.len(), 2);
        assert!(c.inspect("b").await.unwrap().is_some());
    });
}

#[test]
fn memory_limit_evicts_lru_and_counts() {
    let node = TestNode::start(Config { memory_bytes: 1 << 20, ..Config::local() });
    let c = memcache::Client::connect(node.url_ascii()).unwrap();
    let v = vec![b'v'; 10_000];
    for i in 0..400 {
        c.set(&format!("key{i}"), &v[..], 0).unwrap();
        // keep key0 hot: it must survive as the least recently used go
        let _: Option<Vec<u8>> = c.get("key0").unwrap();
    }
    assert!(node.node.store.bytes() <= 1 << 20);
    let s = raw_stats(node.addr);
    assert!(s["evictions"].parse::<u64>().unwrap() > 250, "evictions: {}", s["evictions"]);
    assert!(s["bytes"].parse::<u64>().unwrap() <= 1 << 20);
    assert!(c.get::<Vec<u8>>("key0").unwrap().is_some(), "recently used key was evicted");
    assert!(c.get::<Vec<u8>>("key1").unwrap().is_none(), "oldest key survived");
    assert!(c.get::<Vec<u8>>("key399").unwrap().is_some());
}

/// The node's LRU maintainer thread (`store/maintainer.rs`) sweeps the tails
/// once the store is near its limit, and stores look at a few tail items
/// each: `stats` shows both under memcached's names.
#[test]
fn the_lru_maintainer_sweeps_and_stores_look_at_few_tails() {
    use std::sync::atomic::Ordering;
    let node = TestNode::start(Config { memory_bytes: 1 << 20, ..Config::local() });
    let c = memcache::Client::connect(node.url_ascii()).unwrap();
    let v = vec![b'v'; 1000];
    let store = &node.node.store;
    let mut i = 0;
    while store.hot.evictions.load(Ordering::Relaxed) == 0 {
        c.set(&format!("key{i}"), &v[..], 0).unwrap();
        i += 1;
    }
    // every item read 10 s after its store: "read lately" for 10 s
    store.clock.advance(10);
    for k in 0..i {
        let _: Option<Vec<u8>> = c.get(&format!("key{k}")).unwrap();
    }
    for k in i..i + 2000 {
        c.set(&format!("key{k}"), &v[..], 0).unwrap();
    }
    // the thread has swept (it is woken by evictions; wait for its state, not a time)
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while store.lru.swept.load(Ordering::Relaxed) == 0 {
        assert!(std::time::Instant::now() < deadline, "the maintainer never swept");
        std::thread::yield_now();
    }
    let s = raw_stats(node.addr);
    let n = |k: &str| s[k].parse::<u64>().unwrap();
    assert!(n("lru_maintainer_juggles") > 0);
    assert!(n("moves_within_lru") > 0);
    let per_store = cache_node::store::TAIL_RESCUES as u64 + 1;
    assert!(n("direct_reclaims") <= per_store * n("evictions"), "{} tail items looked at for {} evictions", n("direct_reclaims"), n("evictions"));
}

#[test]
fn expiry_relative_absolute_and_flush_delay() {
    let node = TestNode::local();
    let clock = &node.node.store.clock;
    let unix_soon = clock.unix_now() + 100;
    let req = format!(
        "set rel 0 10 1\r\na\r\nset abs 0 {unix_soon} 1\r\nb\r\nset forever 0 0 1\r\nc\r\nset neg 0 -1 1\r\nd\r\nget rel abs forever neg\r\n"
    );
    let r = exchange(node.addr, req.as_bytes(), b"END\r\n");
    assert!(r.ends_with(b"VALUE rel 0 1\r\na\r\nVALUE abs 0 1\r\nb\r\nVALUE forever 0 1\r\nc\r\nEND\r\n"), "{}", String::from_utf8_lossy(&r));
    clock.advance(11);
    let r = exchange(node.addr, b"get rel abs forever\r\n", b"END\r\n");
    assert_eq!(r, b"VALUE abs 0 1\r\nb\r\nVALUE forever 0 1\r\nc\r\nEND\r\n");
    clock.advance(100);
    let r = exchange(node.addr, b"flush_all 5\r\nget abs forever\r\n", b"END\r\n");
    assert_eq!(r, b"OK\r\nVALUE forever 0 1\r\nc\r\nEND\r\n");
    clock.advance(6);
    assert_eq!(exchange(node.addr, b"get forever\r\n", b"END\r\n"), b"END\r\n");
}

#[test]
fn pipelined_mixed_requests_answered_in_order() {
    let node = TestNode::local();
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..500 {
        req.extend_from_slice(format!("set k{i} {i} 0 {}\r\n{i}\r\nget k{i}\r\nbogus\r\n", i.to_string().len()).as_bytes());
        want.extend_from_slice(format!("STORED\r\nVALUE k{i} {i} {}\r\n{i}\r\nEND\r\nERROR\r\n", i.to_string().len()).as_bytes());
    }
    req.extend_from_slice(b"version\r\n");
    let r = exchange(node.addr, &req, b"VERSION 1.6.18\r\n");
    want.extend_from_slice(b"VERSION 1.6.18\r\n");
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(&want));
}

#[test]
fn stuck_client_does_not_block_others() {
    let node = TestNode::local();
    // One client sends half a request and a huge pipeline it never reads.
    let mut stuck = TcpStream::connect(node.addr).unwrap();
    stuck.write_all(b"set half 0 0 100\r\nabc").unwrap();
    let mut hog = TcpStream::connect(node.addr).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let big = "set big 0 0 60000\r\n".to_string() + &"z".repeat(60000) + "\r\n";
    let _ = hog.write_all(big.as_bytes());
    let gets = "get big\r\n".repeat(2000);
    let _ = hog.write_all(gets.as_bytes()); // may time out: the node stops reading from a peer that does not read
    // Everyone else is served promptly.
    for i in 0..20 {
        let r = exchange(node.addr, format!("set o{i} 0 0 1\r\nx\r\nget o{i}\r\n").as_bytes(), b"END\r\n");
        assert_eq!(r, format!("STORED\r\nVALUE o{i} 0 1\r\nx\r\nEND\r\n").as_bytes());
    }
    drop(stuck);
    drop(hog);
}

#[test]
fn connection_limit_is_enforced() {
    let node = TestNode::start(Config { max_conns: 2, ..Config::local() });
    let mut a = TcpStream::connect(node.addr).unwrap();
    let mut b = TcpStream::connect(node.addr).unwrap();
    a.write_all(b"version\r\n").unwrap();
    b.write_all(b"version\r\n").unwrap();
    assert!(read_until(&mut a, b"\r\n").starts_with(b"VERSION"));
    assert!(read_until(&mut b, b"\r\n").starts_with(b"VERSION"));
    let r = exchange(node.addr, b"version\r\n", b"\r\n");
    assert_eq!(r, b"ERROR Too many open connections\r\n");
    drop(a);
    // the slot frees up once a client leaves
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = exchange(node.addr, b"version\r\n", b"\r\n");
        if r.starts_with(b"VERSION") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slot never freed");
        std::thread::yield_now();
    }
}

#[test]
fn bad_input_keeps_memory_bounded_and_node_alive() {
    let node = TestNode::local();
    // A line with no end: closed after 2048 bytes, like memcached.
    let r = exchange(node.addr, &vec![b'x'; 10_000], b"never");
    assert!(r.is_empty());
    // An absurd binary body length on an unknown opcode is swallowed, not buffered.
    let mut s = TcpStream::connect(node.addr).unwrap();
    let mut hdr = vec![0x80, 0x55, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
    hdr.extend_from_slice(&[0; 12]);
    s.write_all(&hdr).unwrap();
    let r = read_until(&mut s, b"Unknown command");
    assert!(r.ends_with(b"Unknown command"));
    // A value larger than -I: refused and its data swallowed.
    let big = format!("set big 0 0 {}\r\n{}\r\nget big\r\n", 3 << 20, "q".repeat(3 << 20));
    let r = exchange(node.addr, big.as_bytes(), b"END\r\n");
    assert_eq!(r, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    assert!(exchange(node.addr, b"version\r\n", b"\r\n").starts_with(b"VERSION"));
}

#[test]
fn metrics_endpoint_reports_ops() {
    let node = TestNode::start(Config { metrics: Some("127.0.0.1:0".into()), ..Config::local() });
    exchange(node.addr, b"set a 0 0 1\r\nx\r\nget a\r\nget b\r\n", b"END\r\nEND\r\n");
    let maddr = node.metrics_addr.unwrap();
    let mut s = TcpStream::connect(maddr).unwrap();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {maddr}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let body = String::from_utf8(read_until(&mut s, b"never")).unwrap();
    assert!(body.contains("imca_cache_node_ops_total{op=\"get\",result=\"hit\"} 1"), "{body}");
    assert!(body.contains("imca_cache_node_ops_total{op=\"get\",result=\"miss\"} 1"));
    assert!(body.contains("imca_cache_node_items 1"));
    assert!(body.contains("imca_cache_node_request_duration_seconds_count"));
}

#[test]
fn session_core_works_without_a_socket() {
    let node = TestNode::local();
    let mut s = cache_node::Session::new(node.node.clone());
    let mut input = bytes::BytesMut::from(&b"set k 0 0 2\r\nv"[..]);
    let mut out = Vec::new();
    assert_eq!(s.process(&mut input, &mut out), cache_node::Progress::Continue);
    assert!(out.is_empty());
    input.extend_from_slice(b"v\r\nget k\r\nquit\r\n");
    assert_eq!(s.process(&mut input, &mut out), cache_node::Progress::Close);
    assert_eq!(out, b"STORED\r\nVALUE k 0 2\r\nvv\r\nEND\r\n");
}

#[test]
fn graceful_shutdown_closes_connections() {
    let node = TestNode::local();
    let mut c = TcpStream::connect(node.addr).unwrap();
    c.write_all(b"version\r\n").unwrap();
    assert!(read_until(&mut c, b"\r\n").starts_with(b"VERSION"));
    let addr = node.addr;
    node.shutdown();
    assert!(read_until(&mut c, b"never").is_empty(), "connection should be closed");
    assert!(TcpStream::connect(addr).is_err(), "listener should be gone");
}
