//! Attacks on the TCP server's resources, over real sockets against a real
//! in-process server: unfinished frames on many connections, pipelined
//! large reads whose replies are never read, silent and half-hello sockets,
//! idle connections filling every slot. Each must stay bounded (measured by
//! the server's own byte counter and by this process's RSS) while real
//! clients go on being served.
//!
//! Deadlines are configured short (hundreds of ms); waits poll a condition
//! ([`until`]), never sleep for start-up.

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use transport::tcp::{self, Close, ServerOptions, ServerStats, TcpClient, TcpClientOptions};
use transport::{Message, RpcClient, RpcService, TransportError};

const MIB: usize = 1 << 20;

/// A storage server in miniature: "ping" → "pong"; "read N" → N bytes of
/// bulk (and says so in its size hint, as protocol-server does); "hold"
/// waits until the test lets it go.
struct Svc {
    reads: AtomicUsize,
    holding: AtomicUsize,
    hold: tokio::sync::Semaphore,
}

fn read_size(head: &[u8]) -> Option<usize> {
    std::str::from_utf8(head).ok()?.strip_prefix("read ")?.parse().ok()
}

#[async_trait]
impl RpcService for Svc {
    async fn handle(&self, req: Message) -> Message {
        if let Some(n) = read_size(&req.head) {
            self.reads.fetch_add(1, SeqCst);
            return Message::new(Bytes::from_static(b"data"), Bytes::from(vec![7u8; n]));
        }
        if &req.head[..] == b"hold" {
            self.holding.fetch_add(1, SeqCst);
            self.hold.acquire().await.unwrap().forget();
            self.holding.fetch_sub(1, SeqCst);
        }
        Message::new(Bytes::from_static(b"pong"), Bytes::new())
    }

    fn reply_size_hint(&self, req: &Message) -> usize {
        read_size(&req.head).unwrap_or(0)
    }
}

struct Server {
    addr: String,
    stats: Arc<ServerStats>,
    svc: Arc<Svc>,
}

async fn start(opts: ServerOptions) -> Server {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let svc = Svc { reads: AtomicUsize::new(0), holding: AtomicUsize::new(0), hold: tokio::sync::Semaphore::new(0) };
    let (stats, svc) = (opts.stats.clone(), Arc::new(svc));
    tokio::spawn(tcp::serve(l, svc.clone(), opts, std::future::pending()));
    Server { addr, stats, svc }
}

/// Poll `cond` every few ms; panic after 20 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// This process's resident memory.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A raw connection past a good hello.
async fn hello(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    tcp::handshake::client(&mut s, addr, tcp::DEFAULT_MAX_FRAME, None).await.expect("hello accepted");
    s
}

/// `u32 len | u64 id | u32 head_len` of a frame of `head_len + bulk_len`.
fn header(id: u64, head_len: usize, bulk_len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&((12 + head_len + bulk_len) as u32).to_le_bytes());
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&(head_len as u32).to_le_bytes());
    f
}

fn frame(id: u64, head: &[u8]) -> Vec<u8> {
    let mut f = header(id, head.len(), 0);
    f.extend_from_slice(head);
    f
}

/// Reads until the server closes (EOF or reset); panics if it does not within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) {
    let mut buf = vec![0u8; 64 * 1024];
    let r = tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the server should have closed this socket within {within:?}");
}

fn client_opts() -> TcpClientOptions {
    TcpClientOptions { call_timeout: Duration::from_secs(10), ..Default::default() }
}

fn ping() -> Message {
    Message::new(Bytes::from_static(b"ping"), Bytes::new())
}

fn read(n: usize) -> Message {
    Message::new(Bytes::from(format!("read {n}")), Bytes::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_frames_on_many_connections_stay_within_the_pool() {
    let opts = ServerOptions {
        max_frame: 8 * MIB,
        conn_memory: 16 * MIB,
        memory: 32 * MIB, // 24 MiB for large reservations, 8 MiB kept for small ones
        idle_timeout: Some(Duration::from_millis(700)),
        ..Default::default()
    };
    let s = start(opts).await;
    let body = Arc::new(vec![1u8; 7 * MIB]);
    let before = rss();

    // 24 connections, each announcing an 8 MiB frame and sending 7 MiB of it.
    let done = Arc::new(AtomicUsize::new(0));
    let mut socks = Vec::new();
    for i in 0..24 {
        let mut c = hello(&s.addr).await;
        c.write_all(&header(i, 0, 8 * MIB)).await.unwrap();
        let (body, done) = (body.clone(), done.clone());
        socks.push(tokio::spawn(async move {
            if c.write_all(&body).await.is_ok() {
                done.fetch_add(1, SeqCst);
            }
            c // kept open, the frame never finished
        }));
    }
    until("24 connections up", || s.stats.connections() == 24).await;
    // Two frames fit the large share (2 × 8 MiB of 24); the server reads
    // those two whole and nothing more than its small read buffer of the rest.
    until("the admitted bodies received", || done.load(SeqCst) >= 2).await;
    let grown = rss().saturating_sub(before);
    let held = s.stats.buffered_bytes();
    eprintln!("24 unfinished 8 MiB frames: server holds {} MiB (counter), RSS +{} MiB", held / MIB, grown / MIB);
    assert!(held <= 24 * MIB, "held {held}");
    assert!(grown < 48 * MIB, "RSS grew {} MiB (unbounded would be 168)", grown / MIB);
    assert_eq!(done.load(SeqCst), 2, "the others wait in their sockets");

    // Small requests go on being served meanwhile (the pool's small share).
    let c = TcpClient::connect(&s.addr, client_opts()).await.unwrap();
    let t = Instant::now();
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
    assert!(t.elapsed() < Duration::from_millis(500), "took {:?}", t.elapsed());

    // Frames that stop arriving are closed after the idle timeout, which
    // lets the next ones in; memory stays within the pool throughout.
    until("stalled frames closed", || s.stats.closed(Close::Stalled) >= 4).await;
    assert!(s.stats.peak_buffered_bytes() <= 32 * MIB, "peak {}", s.stats.peak_buffered_bytes());
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
    for t in socks {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_reads_whose_replies_are_never_read_stop_being_read() {
    let opts = ServerOptions {
        conn_memory: 16 * MIB,
        memory: 128 * MIB,
        idle_timeout: Some(Duration::from_millis(800)),
        ..Default::default()
    };
    let s = start(opts).await;
    let before = rss();

    // 48 reads of 4 MiB in one burst; not one reply byte read.
    let mut attacker = hello(&s.addr).await;
    let burst: Vec<u8> = (0..48).flat_map(|i| frame(i, b"read 4194304")).collect();
    attacker.write_all(&burst).await.unwrap();
    until("replies filling the budget", || s.stats.buffered_bytes() >= 8 * MIB).await;

    // Others are served meanwhile, large reads included.
    let c = TcpClient::connect(&s.addr, client_opts()).await.unwrap();
    for _ in 0..5 {
        assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
        assert_eq!(c.call(read(2 * MIB), 2 * MIB).await.unwrap().bulk.len(), 2 * MIB);
    }
    let served = s.svc.reads.load(SeqCst) - 5;
    let grown = rss().saturating_sub(before);
    eprintln!(
        "48 pipelined 4 MiB reads, replies unread: {served} served, server holds {} MiB (peak {} MiB), RSS +{} MiB",
        s.stats.buffered_bytes() / MIB,
        s.stats.peak_buffered_bytes() / MIB,
        grown / MIB
    );
    // Served: what the budget holds (16 MiB) plus what the kernel's socket
    // buffers took; never the whole pipeline.
    assert!(served < 24, "the server went on reading: {served} of 48 served");
    // (plus the other client's 2 MiB reads)
    assert!(s.stats.peak_buffered_bytes() <= 21 * MIB, "peak {}", s.stats.peak_buffered_bytes());
    assert!(grown < 64 * MIB, "RSS grew {} MiB (unbounded would be 192)", grown / MIB);

    // Replies that do not move for the idle timeout: the connection is
    // closed and its bytes given back.
    until("the stalled connection closed", || s.stats.closed(Close::Stalled) == 1).await;
    closed_within(&mut attacker, Duration::from_secs(5)).await;
    until("its bytes given back", || s.stats.buffered_bytes() == 0).await;
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
}

#[tokio::test]
async fn silent_and_half_hello_sockets_never_take_a_connection_slot() {
    let opts = ServerOptions {
        max_connections: 4,
        max_handshakes: 4,
        handshake_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let s = start(opts).await;
    // 10 sockets: silent ones and half a hello.
    let mut socks = Vec::new();
    for i in 0..10 {
        let mut c = TcpStream::connect(&s.addr).await.unwrap();
        if i % 2 == 0 {
            c.write_all(b"IMCA\x03").await.unwrap();
        }
        socks.push(c);
    }
    until("10 accepted", || {
        s.stats.handshakes() as u64 + s.stats.closed(Close::HandshakeEvicted) == 10
    })
    .await;
    assert!(s.stats.handshakes() <= 4, "{} handshakes at once", s.stats.handshakes());
    // A gateway gets in at once all the same: it pushes out the oldest.
    let c = TcpClient::connect(&s.addr, client_opts()).await.unwrap();
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
    // Every one of them is closed: pushed out, or at the deadline.
    for c in &mut socks {
        closed_within(c, Duration::from_secs(3)).await;
    }
    until("all counted", || {
        s.stats.closed(Close::HandshakeEvicted) + s.stats.closed(Close::HandshakeTimeout) == 10
    })
    .await;
    assert_eq!(s.stats.connections(), 1);
}

#[tokio::test]
async fn idle_connections_filling_every_slot_give_way_to_a_gateway() {
    let opts = ServerOptions {
        max_connections: 8,
        idle_timeout: Some(Duration::from_millis(1500)),
        evict_after: Duration::from_millis(50),
        ..Default::default()
    };
    let s = start(opts).await;
    let mut idle = Vec::new();
    for _ in 0..8 {
        idle.push(hello(&s.addr).await);
    }
    assert_eq!(s.stats.connections(), 8);
    // Gateways get in all the same: the longest-quiet idle connection is
    // closed for each (once quiet for evict_after).
    let quick = TcpClientOptions { connect_timeout: Duration::from_secs(3), ..client_opts() };
    let mut gateways = Vec::new();
    for _ in 0..3 {
        let g = TcpClient::connect(&s.addr, quick.clone()).await.unwrap();
        assert_eq!(&g.call(ping(), 0).await.unwrap().head[..], b"pong");
        gateways.push(g);
    }
    assert_eq!(s.stats.closed(Close::Evicted), 3);
    assert_eq!(s.stats.connections(), 8);
    drop(gateways);

    // Connections with a request in flight are never pushed out: with every
    // slot busy, a newcomer is told so, clearly.
    let held: Vec<_> = (0..8)
        .map(|_| {
            let addr = s.addr.clone();
            let o = quick.clone();
            tokio::spawn(async move {
                let c = TcpClient::connect(&addr, o).await?;
                c.call(Message::new(Bytes::from_static(b"hold"), Bytes::new()), 0).await
            })
        })
        .collect();
    until("every slot holding a request", || s.svc.holding.load(SeqCst) == 8).await;
    match TcpClient::connect(&s.addr, quick.clone()).await {
        Err(TransportError::Connect(m)) => assert!(m.contains("busy"), "{m}"),
        other => panic!("expected busy, got {:?}", other.map(|_| ())),
    }
    until("the refusal counted", || s.stats.closed(Close::Busy) == 1).await;
    s.svc.hold.add_permits(100);
    for h in held {
        let _ = h.await.unwrap();
    }
    // The raw idle sockets that were not pushed out are closed by the idle timeout.
    for c in &mut idle {
        closed_within(c, Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn a_quiet_gateway_is_not_broken_by_the_idle_timeout() {
    let opts = ServerOptions { idle_timeout: Some(Duration::from_millis(300)), ..Default::default() };
    let s = start(opts).await;
    let c = TcpClient::connect(&s.addr, client_opts()).await.unwrap();
    for round in 0..4 {
        assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong", "round {round}");
        // quiet for longer than the server's idle timeout: the point of the test
        tokio::time::sleep(Duration::from_millis(450)).await;
    }
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
    assert!(s.stats.closed(Close::Idle) >= 3, "the server did close the quiet connections");
}

#[tokio::test]
async fn frame_limits_are_agreed_in_the_hello() {
    let opts = ServerOptions { max_frame: MIB, ..Default::default() };
    let s = start(opts).await;
    let o = TcpClientOptions { max_frame: 2 * MIB, ..client_opts() };
    let c = TcpClient::connect(&s.addr, o).await.unwrap();
    // A request the server would not take fails alone, before it is sent.
    let big = Message::new(Bytes::from_static(b"ping"), Bytes::from(vec![0u8; MIB]));
    assert!(matches!(c.call(big, 0).await, Err(TransportError::TooLarge(_))));
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong", "the connection lives on");
    assert_eq!(s.stats.closed(Close::Invalid), 0);
    // A reply the client would not take closes the connection (the client
    // asked for more than it accepts); the next call reconnects.
    assert!(c.call(read(3 * MIB), 3 * MIB).await.is_err());
    until("counted", || s.stats.closed(Close::Oversized) == 1).await;
    assert_eq!(c.call(read(MIB), MIB).await.unwrap().bulk.len(), MIB);
}

#[tokio::test]
async fn a_slow_reply_restarts_the_idle_clock() {
    let opts = ServerOptions { idle_timeout: Some(Duration::from_millis(300)), ..Default::default() };
    let s = start(opts).await;
    let c = Arc::new(TcpClient::connect(&s.addr, client_opts()).await.unwrap());
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.call(Message::new(Bytes::from_static(b"hold"), Bytes::new()), 0).await })
    };
    until("the request is in the service", || s.svc.holding.load(SeqCst) == 1).await;
    // longer than the idle timeout with a request in flight: not idle
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.svc.hold.add_permits(1);
    slow.await.unwrap().unwrap();
    // The client may use the connection for half the idle timeout after
    // the reply; the server must not count from the request.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(&c.call(ping(), 0).await.unwrap().head[..], b"pong");
    assert_eq!(s.stats.closed(Close::Idle), 0);
}
