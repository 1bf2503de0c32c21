//! RDMA transport on real verbs. These need an RDMA device: run them in the
//! soft-RoCE VM, which boots once for this whole binary:
//!
//! ```sh
//! ./dev rdma-test
//! # or: CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=$PWD/scripts/rdma-vm/run-in-rdma-vm.sh \
//! #       cargo test -p transport --features rdma --test rdma
//! ```
//!
//! The VM exports RDMA_IP (the address bound to rxe0) and RDMA_GID_INDEX.

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};
use transport::rdma::{self, RdmaClient, RdmaListener, RdmaOptions};
use transport::{Message, RpcClient, RpcService, TransportError};

fn ip() -> String {
    std::env::var("RDMA_IP").expect(
        "RDMA_IP is not set: these tests need an RDMA device; run them in the soft-RoCE VM with `./dev rdma-test`",
    )
}

/// Test-only timeouts: the emulated VM acknowledges slowly (see scripts/rdma-vm/README.md).
fn opts() -> RdmaOptions {
    RdmaOptions {
        ack_timeout: 19,
        retry_cnt: 7,
        gid_index: std::env::var("RDMA_GID_INDEX").ok().and_then(|g| g.parse().ok()),
        call_timeout: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(20),
        ..RdmaOptions::default()
    }
}

/// A deterministic payload whose corruption anywhere is detected.
fn pattern(n: usize, seed: u8) -> Bytes {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).to_le_bytes()[0] ^ seed).collect::<Vec<u8>>().into()
}

/// The service: the head is a command.
///   "echo"       reply = request
///   "gen N"      reply bulk = pattern(N)
///   "len"        reply head = request bulk length (decimal)
///   "head N"     reply head = N bytes
///   "block"      wait for `release`, then echo
#[derive(Default)]
struct TestService {
    seen: AtomicUsize,
    arrived: Notify,
    release: Notify,
    released: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl RpcService for TestService {
    async fn handle(&self, req: Message) -> Message {
        self.seen.fetch_add(1, Ordering::SeqCst);
        self.arrived.notify_waiters();
        let cmd = String::from_utf8_lossy(&req.head).to_string();
        let mut words = cmd.split(' ');
        match words.next().unwrap_or("") {
            "gen" => {
                let n: usize = words.next().unwrap().parse().unwrap();
                Message::new(Bytes::from_static(b"ok"), pattern(n, 9))
            }
            "len" => Message::new(Bytes::from(req.bulk.len().to_string()), Bytes::new()),
            "head" => {
                let n: usize = words.next().unwrap().parse().unwrap();
                Message::new(pattern(n, 3), Bytes::new())
            }
            "block" => {
                loop {
                    let n = self.release.notified();
                    if self.released.load(Ordering::SeqCst) {
                        break;
                    }
                    n.await;
                }
                req
            }
            _ => req,
        }
    }
}

impl TestService {
    async fn wait_seen(&self, n: usize) {
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let a = self.arrived.notified();
                if self.seen.load(Ordering::SeqCst) >= n {
                    return;
                }
                a.await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("service saw {} requests, expected {n}", self.seen.load(Ordering::SeqCst)));
    }

    fn release_all(&self) {
        self.released.store(true, Ordering::SeqCst);
        self.release.notify_waiters();
    }
}

struct Server {
    addr: String,
    stats: rdma::StatsHandle,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

async fn start(svc: Arc<TestService>, o: RdmaOptions) -> Server {
    let l = RdmaListener::bind(&format!("{}:0", ip())).await.expect("bind");
    let addr = l.local_addr().to_string();
    let stats = l.stats_handle();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(rdma::serve(l, svc, o, async move {
        let _ = rx.await;
    }));
    Server { addr, stats, stop: Some(tx), task }
}

fn msg(head: &str, bulk: Bytes) -> Message {
    Message::new(Bytes::from(head.to_string()), bulk)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_agrees_on_handshake() {
    let srv = start(Arc::default(), RdmaOptions { recv_count: 8, msg_size: 4096, ..opts() }).await;
    let c = RdmaClient::connect(&srv.addr, RdmaOptions { recv_count: 16, inline_threshold: 1000, ..opts() }).await.unwrap();
    let a = c.agreed().await.unwrap();
    assert_eq!(a.send_credits, 7, "credits = the server's receive buffers - 1");
    assert_eq!(a.recv_count, 16);
    assert_eq!(a.msg_size, 4096, "the smaller message size wins");
    assert_eq!(a.inline_threshold, 1000);
    assert_eq!(a.path_mtu, 5, "rxe over the 9000-byte dummy netdev: active MTU 4096");
    let r = c.call(msg("echo", Bytes::from_static(b"hi")), 0).await.unwrap();
    assert_eq!(&r.bulk[..], b"hi");
    assert!(c.describe().starts_with("rdma://"));
    assert_eq!(srv.stats.get().connections, 1);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_calls_return_credits_by_piggyback() {
    let o = RdmaOptions { recv_count: 4, ..opts() };
    let srv = start(Arc::default(), o.clone()).await;
    let c = RdmaClient::connect(&srv.addr, o).await.unwrap();
    for i in 0..40u8 {
        let r = c.call(msg("echo", pattern(100, i)), 0).await.unwrap();
        assert_eq!(r.bulk, pattern(100, i));
    }
    let (cs, ss) = (c.stats(), srv.stats.get());
    assert_eq!(cs.credit_waits, 0, "one call at a time never runs out of credits");
    assert_eq!(cs.credit_updates + ss.credit_updates, 0, "replies and requests carry the credits back");
    assert_eq!((ss.reads, ss.writes), (0, 0), "small messages travel inline");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credits_exhausted_and_replenished() {
    let o = RdmaOptions { recv_count: 4, ..opts() };
    let svc = Arc::new(TestService::default());
    let srv = start(svc.clone(), o.clone()).await;
    let c = Arc::new(RdmaClient::connect(&srv.addr, o).await.unwrap());
    let n = 12;
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.call(msg("block", pattern(50, i as u8)), 0).await })
        })
        .collect();
    // 12 requests through 3 credits while no reply has gone out: only the
    // server's explicit credit updates can let them all arrive.
    svc.wait_seen(n).await;
    assert!(c.stats().credit_waits > 0, "the client ran out of credits");
    assert!(srv.stats.get().credit_updates > 0, "the server returned credits without replies");
    svc.release_all();
    for (i, t) in calls.into_iter().enumerate() {
        let r = t.await.unwrap().expect("call");
        assert_eq!(r.bulk, pattern(50, i as u8));
    }
    // 12 replies into the client's 4 receives: the client had to report its own.
    assert!(c.stats().credit_updates > 0, "the client returned credits to the server");
    assert_eq!(srv.stats.get().protocol_errors, 0);
    // still healthy (an RNR with rnr_retry = 0 would have killed the QP)
    assert_eq!(&c.call(msg("echo", Bytes::from_static(b"x")), 0).await.unwrap().bulk[..], b"x");
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_size_class_round_trips() {
    let srv = start(Arc::default(), opts()).await;
    let c = RdmaClient::connect(&srv.addr, opts()).await.unwrap();
    let mut sizes = vec![0, 1, 100, 4000, 4096, 4097, 8191];
    for &class in rdma::SIZE_CLASSES.iter() {
        sizes.extend([class - 1, class, class + 1]);
    }
    sizes.push(9 << 20); // beyond the largest class: a one-off registration
    for (i, &n) in sizes.iter().enumerate() {
        let data = pattern(n, i as u8);
        let r = c.call(msg("echo", data.clone()), n).await.unwrap_or_else(|e| panic!("{n} bytes: {e}"));
        assert_eq!(r.head, Bytes::from_static(b"echo"));
        assert!(r.bulk == data, "{n}-byte bulk came back different");
    }
    let s = srv.stats.get();
    assert!(s.reads > 0 && s.writes > 0);
    assert_eq!(s.protocol_errors, 0);
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_write_and_read_paths() {
    let srv = start(Arc::default(), opts()).await;
    let c = RdmaClient::connect(&srv.addr, opts()).await.unwrap();
    let delta = |before: rdma::RdmaStats, after: rdma::RdmaStats| (after.reads - before.reads, after.writes - before.writes);

    // small both ways: Sends only
    let s0 = srv.stats.get();
    let r = c.call(msg("echo", pattern(1000, 1)), 1000).await.unwrap();
    assert_eq!(r.bulk, pattern(1000, 1));
    assert_eq!(delta(s0, srv.stats.get()), (0, 0), "inline");

    // large reply: RDMA Write into the client's buffer, then the Send
    let s0 = srv.stats.get();
    let r = c.call(msg("gen 100000", Bytes::new()), 100000).await.unwrap();
    assert_eq!(r.bulk, pattern(100000, 9));
    assert_eq!(delta(s0, srv.stats.get()), (0, 1), "reply bulk by RDMA Write");

    // large request: the server RDMA-Reads it
    let s0 = srv.stats.get();
    let r = c.call(msg("len", pattern(100000, 2)), 0).await.unwrap();
    assert_eq!(&r.head[..], b"100000");
    assert_eq!(delta(s0, srv.stats.get()), (1, 0), "request bulk by RDMA Read");

    // a head too big for a Send: read with the request, written into the head region
    let s0 = srv.stats.get();
    let big_head = "echo ".to_string() + &"x".repeat(20000);
    let r = c.call(Message::new(Bytes::from(big_head.clone()), pattern(10, 1)), 0).await.unwrap();
    assert_eq!(r.head, Bytes::from(big_head));
    assert_eq!(r.bulk, pattern(10, 1));
    assert_eq!(delta(s0, srv.stats.get()), (1, 1), "oversized heads go by RDMA both ways");
    let r = c.call(msg("head 30000", Bytes::new()), 0).await.unwrap();
    assert_eq!(r.head, pattern(30000, 3));

    // above the copy threshold the caller's buffer is registered once and reused
    // (the cache is per device, shared with the other tests in this process)
    let big = pattern(1 << 20, 5);
    let hits0 = c.stats().mr_cache_hits;
    for _ in 0..3 {
        let r = c.call(msg("len", big.clone()), 0).await.unwrap();
        assert_eq!(&r.head[..], b"1048576");
    }
    let cs = c.stats();
    assert!(cs.mr_cache_hits - hits0 >= 2, "registered once, then found in the cache: {cs:?}");

    // a reply bigger than the caller accepts is refused, not truncated
    match c.call(msg("gen 100000", Bytes::new()), 50000).await {
        Err(TransportError::TooLarge(n)) => assert_eq!(n, 100000),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // and the connection is still fine
    assert_eq!(c.call(msg("gen 5000", Bytes::new()), 5000).await.unwrap().bulk, pattern(5000, 9));
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_poll_mode_works() {
    let o = RdmaOptions { busy_poll: true, ..opts() };
    let srv = start(Arc::default(), o.clone()).await;
    let c = RdmaClient::connect(&srv.addr, o).await.unwrap();
    for n in [10, 100000] {
        let r = c.call(msg("echo", pattern(n, 4)), n).await.unwrap();
        assert_eq!(r.bulk, pattern(n, 4));
    }
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_going_away_mid_transfer_fails_the_call() {
    let svc = Arc::new(TestService::default());
    let srv = start(svc.clone(), RdmaOptions { drain_timeout: Duration::from_millis(100), ..opts() }).await;
    let c = Arc::new(RdmaClient::connect(&srv.addr, opts()).await.unwrap());
    let c2 = c.clone();
    let call = tokio::spawn(async move { c2.call(msg("block", pattern(2 << 20, 1)), 2 << 20).await });
    svc.wait_seen(1).await; // the 2 MiB was RDMA-Read; the reply is pending
    srv.stop().await;
    let r = tokio::time::timeout(Duration::from_secs(60), call).await.expect("call must not hang").unwrap();
    assert!(matches!(r, Err(TransportError::Disconnected(_))), "got {r:?}");
    // the next call reconnects, and fails cleanly: nobody listens any more
    assert!(c.call(msg("echo", Bytes::new()), 0).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_going_away_mid_transfer_leaves_server_healthy() {
    let svc = Arc::new(TestService::default());
    let srv = start(svc.clone(), opts()).await;
    {
        let c = Arc::new(RdmaClient::connect(&srv.addr, opts()).await.unwrap());
        let c2 = c.clone();
        let call = tokio::spawn(async move { c2.call(msg("block", pattern(3 << 20, 1)), 3 << 20).await });
        svc.wait_seen(1).await;
        call.abort();
        let _ = call.await;
        drop(c); // disconnects while the server still owes a 3 MiB RDMA Write
    }
    svc.release_all(); // the blocked handler now replies into a dead connection
    let c = RdmaClient::connect(&srv.addr, opts()).await.unwrap();
    let r = c.call(msg("echo", pattern(1 << 20, 2)), 1 << 20).await.unwrap();
    assert_eq!(r.bulk, pattern(1 << 20, 2));
    srv.stop().await;
}

/// A raw request header (layout in transport/src/rdma/proto.rs).
fn raw_header(flags: u8, bulk_len: u32, read: (u64, u32, u32)) -> Vec<u8> {
    let mut h = vec![0u8; 80];
    h[..4].copy_from_slice(b"IMCR");
    h[4] = 1; // request
    h[5] = flags;
    h[8..16].copy_from_slice(&77u64.to_le_bytes());
    h[20..24].copy_from_slice(&bulk_len.to_le_bytes());
    h[24..32].copy_from_slice(&read.0.to_le_bytes());
    h[32..36].copy_from_slice(&read.1.to_le_bytes());
    h[36..40].copy_from_slice(&read.2.to_le_bytes());
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_a_peer_drops_only_that_connection() {
    let srv = start(Arc::default(), opts()).await;

    // 1. a handshake that is not ours
    let bad = RdmaOptions { hello_override: Some(b"GARBAGE-GARBAGE-GARBAGE".to_vec()), ..opts() };
    match RdmaClient::connect(&srv.addr, bad).await {
        Err(TransportError::Connect(e)) => assert!(e.contains("rejected"), "{e}"),
        Err(e) => panic!("expected a rejected connection, got {e}"),
        Ok(_) => panic!("garbage handshake accepted"),
    }
    assert_eq!(srv.stats.get().rejected, 1);

    // 2. random bytes as a message, 3. a well-formed header with a bogus rkey
    let garbage: Vec<Vec<u8>> = vec![
        b"this is not an IMCa RDMA message at all, but it is long enough to look like one..........".to_vec(),
        raw_header(2, 4096, (0x1000, 0xdead_beef, 4096)),
    ];
    for (i, g) in garbage.iter().enumerate() {
        let c = RdmaClient::connect(&srv.addr, opts()).await.unwrap();
        let c2 = RdmaClient::connect(&srv.addr, opts()).await.unwrap(); // a well-behaved neighbour
        c.send_raw(g).await.unwrap();
        // the server drops the bad connection; the client's next call notices
        let r = tokio::time::timeout(Duration::from_secs(60), async {
            while c.is_connected().await {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(r.is_ok(), "garbage #{i} did not close the connection");
        let r = c2.call(msg("echo", Bytes::from_static(b"still here")), 0).await.unwrap();
        assert_eq!(&r.bulk[..], b"still here");
    }
    assert!(srv.stats.get().protocol_errors >= 1, "the invalid message was counted");
    // and new clients are served
    let c = RdmaClient::connect(&srv.addr, opts()).await.unwrap();
    assert_eq!(c.call(msg("gen 70000", Bytes::new()), 70000).await.unwrap().bulk, pattern(70000, 9));
    srv.stop().await;
}

fn key(b: u8) -> secret::Key {
    secret::Secret::from_bytes(&[b; 32]).unwrap().key(secret::Purpose::RpcHandshake)
}

/// A connection request that claims to authenticate (flag set, a nonce)
/// from a client that will never send its proof.
fn unproven_hello() -> Vec<u8> {
    let mut hello = Vec::new();
    hello.extend_from_slice(b"IMCH");
    hello.extend_from_slice(&transport::rdma::VERSION.to_le_bytes());
    hello.extend_from_slice(&32u16.to_le_bytes()); // recv_count
    hello.extend_from_slice(&8192u32.to_le_bytes()); // msg_size
    hello.extend_from_slice(&4096u32.to_le_bytes()); // inline_threshold
    hello.extend_from_slice(&[5, 1, 0, 0]); // active MTU, flags: authenticates
    hello.extend_from_slice(&[0x11; 32]); // nonce
    hello
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_peer_holding_the_volume_key_is_served() {
    let svc: Arc<TestService> = Arc::default();
    let with = |k: u8| RdmaOptions { auth: Some(key(k)), ..opts() };
    let srv = start(svc.clone(), with(1)).await;
    let good = RdmaClient::connect(&srv.addr, with(1)).await.unwrap();
    let r = good.call(msg("echo", Bytes::from_static(b"hi")), 0).await.unwrap();
    assert_eq!(&r.bulk[..], b"hi");

    // Another volume's key: the client refuses the server's proof.
    match RdmaClient::connect(&srv.addr, with(2)).await {
        Err(TransportError::Auth(m)) => assert!(m.contains("does not hold this volume's secret"), "{m}"),
        other => panic!("expected an authentication error, got {:?}", other.err()),
    }
    // No key: the server rejects the connection request.
    match RdmaClient::connect(&srv.addr, opts()).await {
        Err(TransportError::Connect(e)) => assert!(e.contains("rejected"), "{e}"),
        other => panic!("expected a rejected connection, got {:?}", other.err()),
    }
    // Claims to authenticate, then sends a request instead of its proof.
    let sneaky = RdmaClient::connect(&srv.addr, RdmaOptions { hello_override: Some(unproven_hello()), ..opts() }).await.unwrap();
    assert!(sneaky.call(msg("echo", Bytes::from_static(b"x")), 0).await.is_err());
    assert_eq!(svc.seen.load(Ordering::SeqCst), 1, "only the authenticated call reached the service");
    assert!(good.call(msg("echo", Bytes::from_static(b"again")), 0).await.is_ok(), "the good client is unaffected");

    // A client with a key refuses a server without one.
    let open = start(Arc::default(), opts()).await;
    match RdmaClient::connect(&open.addr, with(1)).await {
        Err(TransportError::Auth(m)) => assert!(m.contains("does not authenticate"), "{m}"),
        other => panic!("expected an authentication error, got {:?}", other.err()),
    }
    open.stop().await;
    srv.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_slots_are_bounded_and_unproven_peers_make_room() {
    let svc: Arc<TestService> = Arc::default();
    let with = |k: u8| RdmaOptions { auth: Some(key(k)), ..opts() };
    let srv = start(svc.clone(), RdmaOptions { max_connections: 3, max_unauthenticated: 1, ..with(1) }).await;
    // A peer that claims to authenticate and never sends its proof…
    let squatter = RdmaClient::connect(&srv.addr, RdmaOptions { hello_override: Some(unproven_hello()), ..opts() }).await.unwrap();
    // …is closed when a second unproven peer arrives (here: a real client,
    // which proves itself at once).
    let a = RdmaClient::connect(&srv.addr, with(1)).await.unwrap();
    // A reply means the server has taken a's proof (it is read first), so a
    // no longer counts as unproven when the next peer arrives.
    a.call(msg("echo", Bytes::new()), 0).await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(60), async {
        while squatter.is_connected().await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the unproven squatter was not closed to make room");
    let b = RdmaClient::connect(&srv.addr, with(1)).await.unwrap();
    b.call(msg("echo", Bytes::new()), 0).await.unwrap();
    let c = RdmaClient::connect(&srv.addr, with(1)).await.unwrap();
    c.call(msg("echo", Bytes::new()), 0).await.unwrap();
    // Three served: a fourth is refused as busy.
    match RdmaClient::connect(&srv.addr, with(1)).await {
        Err(TransportError::Connect(e)) => assert!(e.contains("rejected"), "{e}"),
        other => panic!("a fourth connection was not refused: {:?}", other.err()),
    }
    // Large pulled bulks from all three at once fit the memory budget in turn.
    let big = pattern(3 << 20, 5);
    let (ra, rb, rc) = tokio::join!(
        a.call(msg("len", big.clone()), 0),
        b.call(msg("len", big.clone()), 0),
        c.call(msg("len", big.clone()), 0)
    );
    for r in [ra, rb, rc] {
        assert_eq!(&r.unwrap().head[..], (3usize << 20).to_string().as_bytes());
    }
    srv.stop().await;
}

/// The measurement behind `copy_threshold`; prints a table (`--nocapture`).
#[test]
fn copy_vs_register() {
    let _ = ip();
    println!("copy_vs_register: bytes, memcpy ns, ibv_reg_mr+dereg ns");
    for shift in [12, 14, 16, 17, 18, 19, 20, 22, 24] {
        let (copy, reg) = rdma::measure_copy_vs_register(1 << shift, 21).unwrap();
        println!("copy_vs_register: {:>9} {:>10} {:>10}", 1usize << shift, copy, reg);
        assert!(copy > 0 && reg > 0);
    }
}

/// RDMA vs TCP through the same `RpcClient` boundary, both over the VM's
/// rdma0 interface (`--ignored`; docs/benchmarks.md "RDMA vs TCP"):
/// small-call latency (64-byte head, 4 KiB reply bulk, the shape of a cache
/// get or a stat) and 1 MiB reply bandwidth (the shape of a storage read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_rdma_vs_tcp() {
    use std::time::Instant;
    use transport::tcp;
    let svc: Arc<TestService> = Arc::default();
    let srv = start(svc.clone(), opts()).await;
    let rdma_c: Arc<dyn RpcClient> = Arc::new(RdmaClient::connect(&srv.addr, opts()).await.unwrap());
    let tl = tokio::net::TcpListener::bind(format!("{}:0", ip())).await.unwrap();
    let taddr = tl.local_addr().unwrap().to_string();
    tokio::spawn(tcp::serve(tl, svc.clone(), tcp::ServerOptions::default(), std::future::pending()));
    let tcp_c: Arc<dyn RpcClient> = Arc::new(tcp::TcpClient::connect(&taddr, tcp::TcpClientOptions::default()).await.unwrap());

    let lat = |c: Arc<dyn RpcClient>| async move {
        let head = "gen 4096";
        for _ in 0..50 {
            c.call(msg(head, Bytes::new()), 4096).await.unwrap();
        }
        let mut v = Vec::new();
        for _ in 0..500 {
            let t = Instant::now();
            c.call(msg(head, Bytes::new()), 4096).await.unwrap();
            v.push(t.elapsed().as_micros() as u64);
        }
        v.sort_unstable();
        (v[v.len() / 2], v[v.len() * 99 / 100])
    };
    let bw = |c: Arc<dyn RpcClient>| async move {
        let n = 1 << 20;
        for _ in 0..3 {
            c.call(msg("gen 1048576", Bytes::new()), n).await.unwrap();
        }
        let t = Instant::now();
        let mut bytes = 0;
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move {
                    let mut b = 0;
                    for _ in 0..16 {
                        b += c.call(msg("gen 1048576", Bytes::new()), n).await.unwrap().bulk.len();
                    }
                    b
                })
            })
            .collect();
        for h in calls {
            bytes += h.await.unwrap();
        }
        bytes as f64 / t.elapsed().as_secs_f64() / 1e6
    };
    let busy: Arc<dyn RpcClient> =
        Arc::new(RdmaClient::connect(&srv.addr, RdmaOptions { busy_poll: true, ..opts() }).await.unwrap());
    let bl = lat(busy.clone()).await;
    drop(busy);
    println!("bench: small call p50/p99 us: rdma busy-poll client {}/{}", bl.0, bl.1);
    let (rl, tl_) = (lat(rdma_c.clone()).await, lat(tcp_c.clone()).await);
    let (rb, tb) = (bw(rdma_c.clone()).await, bw(tcp_c.clone()).await);
    println!("bench: small call p50/p99 us: rdma {}/{} tcp {}/{}", rl.0, rl.1, tl_.0, tl_.1);
    println!("bench: 1 MiB reply bandwidth MB/s (4 in flight): rdma {rb:.1} tcp {tb:.1}");
    println!("bench: ratios: latency rdma/tcp {:.2}, bandwidth rdma/tcp {:.2}", rl.0 as f64 / tl_.0 as f64, rb / tb);
    srv.stop().await;
}

/// The cache node's `--rdma` listener: memcached protocol in RDMA messages,
/// large values pulled by RDMA Read, multi-get values RDMA-Written back; the
/// same item is visible over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_node_over_rdma() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    std::env::set_var("IMCA_RDMA_ACK_TIMEOUT", "19");
    std::env::set_var("IMCA_RDMA_RETRY_CNT", "7");
    let cfg = cache_node::Config { rdma: Some(format!("{}:0", ip())), ..cache_node::Config::local() };
    let h = cache_node::start(cfg).await.unwrap();
    let c = RdmaClient::connect(h.rdma_addr.unwrap().to_string(), opts()).await.unwrap();
    let r = c.call(msg("set k 0 0 5\r\nhello\r\nget k\r\n", Bytes::new()), 4096).await.unwrap();
    assert_eq!(&r.bulk[..], b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n");

    let big = pattern(200_000, 7);
    let mut data = big.to_vec();
    data.extend_from_slice(b"\r\n");
    let r = c.call(Message::new(Bytes::from_static(b"set big 0 0 200000\r\n"), data.into()), 0).await.unwrap();
    assert_eq!(&r.bulk[..], b"STORED\r\n");
    let r = c.call(msg("get k big\r\n", Bytes::new()), 300_000).await.unwrap();
    let mut want = b"VALUE k 0 5\r\nhello\r\nVALUE big 0 200000\r\n".to_vec();
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\nEND\r\n");
    assert!(r.bulk[..] == want[..], "multi-get over RDMA returned {} bytes", r.bulk.len());

    // the same node over TCP sees what was set over RDMA
    let mut s = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    s.write_all(b"get big\r\n").await.unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"END\r\n") {
        let mut b = vec![0u8; 65536];
        let n = s.read(&mut b).await.unwrap();
        assert!(n > 0, "connection closed");
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(&got[..], &want[20..], "TCP sees the value set over RDMA");
    h.shutdown().await;
}

/// A cache node serving TCP and RDMA on one ip:port (`--transport rdma`),
/// and the environment the bank's RDMA connections read their QP settings from.
async fn rdma_cache_node() -> cache_node::Handle {
    std::env::set_var("IMCA_RDMA_ACK_TIMEOUT", "19");
    std::env::set_var("IMCA_RDMA_RETRY_CNT", "7");
    if let Ok(g) = std::env::var("RDMA_GID_INDEX") {
        std::env::set_var("IMCA_RDMA_GID_INDEX", g);
    }
    let cfg = cache_node::Config { listen: format!("{}:0", ip()), rdma_on_listen: true, ..cache_node::Config::local() };
    let h = cache_node::start(cfg).await.unwrap();
    assert_eq!(h.rdma_addr, Some(h.addr), "RDMA on the TCP listener's ip:port");
    h
}

fn bank(addr: &str, rdma: bool) -> cache_bank::Bank {
    let o = cache_bank::BankOptions {
        timeout: Duration::from_secs(20), // the emulated VM is slow; a miss here would be a false failure
        connect_timeout: Duration::from_secs(20),
        rdma,
        metrics: BANK_METRICS.clone(),
        ..Default::default()
    };
    cache_bank::Bank::new(&[addr.to_string()], volume::Placement::Crc32, o)
}

/// The bank logs in over RDMA too: a node started with memcached's `-Y`
/// serves a bank with the right login and nothing to one without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_logs_in_to_a_node_with_ascii_auth_over_rdma() {
    use cache_bank::Update;
    let users = cache_node::auth::Users::parse("imca:s3cret\n").unwrap();
    rdma_cache_node().await.shutdown().await; // (sets the environment the banks' QPs read)
    let cfg = cache_node::Config {
        listen: format!("{}:0", ip()),
        rdma_on_listen: true,
        auth: Some(std::sync::Arc::new(users)),
        ..cache_node::Config::local()
    };
    let h = cache_node::start(cfg).await.unwrap();
    let addr = h.addr.to_string();
    let with = |creds: Option<cache_bank::Credentials>| {
        let o = cache_bank::BankOptions {
            timeout: Duration::from_secs(20),
            connect_timeout: Duration::from_secs(20),
            rdma: true,
            metrics: BANK_METRICS.clone(),
            node_credentials: creds,
            ..Default::default()
        };
        cache_bank::Bank::new(&[addr.clone()], volume::Placement::Crc32, o)
    };
    let good = with(cache_bank::Credentials::parse("imca:s3cret"));
    let wait = Some(Duration::from_secs(30));
    good.update(&[Update::Set(ckey(1), pattern(100_000, 3))], wait).await.unwrap();
    let got = good.get_many(&[ckey(1)], false).await;
    assert_eq!(got[0].as_ref().map(|h| h.value.clone()), Some(pattern(100_000, 3)), "logged in: a hit over RDMA");
    for creds in [None, cache_bank::Credentials::parse("imca:wrong")] {
        let bad = with(creds);
        assert!(bad.get_many(&[ckey(1)], false).await[0].is_none(), "without the login: a miss");
    }
    assert!(good.get_many(&[ckey(1)], false).await[0].is_some(), "the node is unharmed");
    h.shutdown().await;
}

fn ckey(i: usize) -> cache_bank::CacheKey {
    cache_bank::CacheKey { key: format!("imca:t:1:b:16384:{i:032x}:{i}"), stripe: Some(i as u64) }
}

/// Shared by every bank of this binary, so `connects` counts across them.
static BANK_METRICS: std::sync::LazyLock<cache_bank::BankMetrics> = std::sync::LazyLock::new(Default::default);

fn connects(addr: &str, transport: &str) -> u64 {
    BANK_METRICS.connects.with_label_values(&[addr, transport]).get()
}

/// cache_bank::Bank over RDMA against a real cache node: sets (inline and by
/// RDMA Read), a multi-get of many blocks RDMA-Written back, misses, send
/// order across queued batches, and a node that goes away (misses, and a
/// writer that sees it gone), all on one RDMA connection, and TCP agreeing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bank_over_rdma_against_a_cache_node() {
    use cache_bank::Update;
    let h = rdma_cache_node().await;
    let addr = h.addr.to_string();
    let b = bank(&addr, true);
    let wait = Some(Duration::from_secs(30));

    // 64 blocks of 16 KiB in one batch (1 MiB: the node RDMA-Reads it) and
    // a 200 KB value (> copy threshold: read in place from our memory).
    let blocks: Vec<Bytes> = (0..64).map(|i| pattern(16 << 10, i as u8)).collect();
    let sets: Vec<Update> = blocks.iter().enumerate().map(|(i, v)| Update::Set(ckey(i), v.clone())).collect();
    b.update(&sets, wait).await.unwrap();
    let big = pattern(200_000, 77);
    b.update(&[Update::Set(ckey(1000), big.clone())], wait).await.unwrap();
    b.update(&[Update::Set(ckey(1001), Bytes::from_static(b"small\r\nEND\r\n"))], wait).await.unwrap();

    // one multi-get of all of them plus absent keys: hits and misses in place
    let mut keys: Vec<_> = (0..64).map(ckey).collect();
    keys.extend([ckey(1000), ckey(1001), ckey(5000), ckey(5001)]);
    for round in 0..2 {
        // round 0: the reply outgrows the first guess (retried with the exact
        // size); round 1: sized from what the connection has seen
        let got = b.get_many(&keys, false).await;
        for i in 0..64 {
            assert_eq!(got[i].as_ref().map(|h| &h.value), Some(&blocks[i]), "block {i}, round {round}");
        }
        assert_eq!(got[64].as_ref().map(|h| &h.value), Some(&big));
        assert_eq!(got[65].as_ref().unwrap().value, Bytes::from_static(b"small\r\nEND\r\n"));
        assert!(got[66].is_none() && got[67].is_none(), "absent keys are misses");
    }
    // gets with CAS uniques, and a TCP bank sees exactly the same
    let tcp = bank(&addr, false);
    assert_eq!(b.get_many(&keys, true).await, tcp.get_many(&keys, true).await);

    // order: a burst of queued (unawaited) updates to one key, then a waited
    // one; they coalesce into few messages and must apply in send order
    let k = ckey(7);
    for n in 0..300u32 {
        let u = if n % 7 == 3 { Update::Delete(k.clone()) } else { Update::Set(k.clone(), Bytes::from(n.to_string())) };
        b.update(&[u], None).await.unwrap();
    }
    b.update(&[Update::Add(k.clone(), Bytes::from_static(b"added"))], wait).await.unwrap();
    let got = b.get_many(std::slice::from_ref(&k), false).await;
    assert_eq!(got[0].as_ref().unwrap().value, Bytes::from_static(b"299"), "last queued set wins; the add finds it");

    assert_eq!(connects(&addr, "rdma"), 1, "one RDMA connection carried everything");

    // the node goes away: reads are misses (not errors, not hangs), and a
    // writer learns from its TCP listener's refusal that nothing is cached
    h.shutdown().await;
    let t = std::time::Instant::now();
    assert!(b.get_many(&keys, false).await.iter().all(Option::is_none), "a gone node is all misses");
    assert!(b.get_many(&keys, false).await.iter().all(Option::is_none), "and stays so while backed off");
    b.update(&[Update::Delete(ckey(1))], wait).await.expect("a gone node holds nothing: the writer may go on");
    println!("node gone: misses and writer verdict in {:?}", t.elapsed());
}

/// Percentiles (p50, p99) in µs of `n` timed calls of `f` after a warm-up.
async fn lat_us<F: std::future::Future<Output = ()>>(n: usize, mut f: impl FnMut() -> F) -> (u64, u64) {
    for _ in 0..20 {
        f().await;
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = std::time::Instant::now();
        f().await;
        v.push(t.elapsed().as_micros() as u64);
    }
    v.sort_unstable();
    (v[n / 2], v[n * 99 / 100])
}

/// Cache get latency through cache_bank::Bank, RDMA vs TCP, against one
/// cache node in the same VM: a 1-key get (a stat) and a 16-block get (a
/// 64 KiB read of 4 KiB blocks). docs/benchmarks.md "RDMA vs TCP".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_bank_get_rdma_vs_tcp() {
    use cache_bank::Update;
    let h = rdma_cache_node().await;
    let addr = h.addr.to_string();
    let (r, t) = (bank(&addr, true), bank(&addr, false));
    let stat = vec![ckey(0)];
    let blocks: Vec<_> = (1..17).map(ckey).collect();
    let mut sets = vec![Update::Set(ckey(0), pattern(120, 1))];
    sets.extend(blocks.iter().map(|k| Update::Set(k.clone(), pattern(4096 + 16, 2))));
    r.update(&sets, Some(Duration::from_secs(30))).await.unwrap();
    let mut rows = Vec::new();
    for (name, keys) in [("1-key get", &stat), ("16-block get (4 KiB blocks)", &blocks)] {
        let mut row = Vec::new();
        for b in [&r, &t] {
            row.push(
                lat_us(300, || async {
                    assert!(b.get_many(keys, false).await.iter().all(Option::is_some));
                })
                .await,
            );
        }
        println!(
            "bench: bank {name} p50/p99 us: rdma {}/{} tcp {}/{} ratio p50 rdma/tcp {:.2}",
            row[0].0,
            row[0].1,
            row[1].0,
            row[1].1,
            row[0].0 as f64 / row[1].0 as f64
        );
        rows.push(row);
    }
    assert_eq!(connects(&addr, "rdma"), 1);
    h.shutdown().await;
}
