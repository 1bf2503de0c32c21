//! A local user attacking a real storage server's resources over the real
//! storage RPC (hello, frames, `wire` requests), while a real gateway client
//! (protocol-client) goes on working: unfinished frames on many
//! connections, pipelined 32 MiB reads whose replies are never read, and
//! silent, half-hello and idle sockets filling every slot. Memory is read
//! from the server's own counter and from this process's RSS.

mod common;
use bytes::Bytes;
use common::*;
use protocol_client::{ClientOptions, ProtocolClient};
use std::time::{Duration, Instant};
use storage_server::{Args, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use transport::tcp::Close;
use wire::Request;
use xlator::*;

const MIB: usize = 1 << 20;

fn args(export: &std::path::Path) -> Args {
    let mut a = common::args(export);
    a.rpc.idle_timeout = Duration::from_millis(800);
    a
}

struct Env {
    _dir: tempfile::TempDir,
    server: Server,
    gw: ProtocolClient,
}

async fn start(set: impl FnOnce(&mut Args)) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let mut a = args(&export);
    set(&mut a);
    let server = storage_server::start(a).await.unwrap();
    let gw = protocol_client::connect(&server.addr.to_string(), gateway()).await.unwrap();
    Env { _dir: dir, server, gw }
}

fn gateway() -> ClientOptions {
    ClientOptions { op_timeout: Duration::from_secs(20), ..common::opts() }
}

/// Poll `cond` every few ms; panic after 30 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() * 4096
}

/// A raw storage RPC connection past the hello.
async fn hello(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    transport::tcp::handshake::client(&mut s, &addr.to_string(), 64 * MIB, Some(&common::key())).await.expect("hello accepted");
    s
}

/// One storage RPC frame: `u32 len | u64 id | u32 head_len | head | bulk`.
fn frame(id: u64, req: &Request) -> Vec<u8> {
    let m = req.encode();
    let mut f = Vec::new();
    f.extend_from_slice(&((12 + m.head.len() + m.bulk.len()) as u32).to_le_bytes());
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&(m.head.len() as u32).to_le_bytes());
    f.extend_from_slice(&m.head);
    f.extend_from_slice(&m.bulk);
    f
}

/// A 32 MiB file written through the gateway client.
async fn big_file(e: &Env, name: &str) -> Loc {
    let f = nf(name);
    e.gw.create(&root(), &f, 0).await.unwrap();
    let loc = at(name, f.fid);
    let mib = Bytes::from(vec![b'x'; MIB]);
    for i in 0..32u64 {
        e.gw.write(&loc, i * MIB as u64, mib.clone()).await.unwrap();
    }
    loc
}

async fn scrape(s: &Server) -> String {
    let mut c = TcpStream::connect(s.metrics_addr.expect("--metrics given")).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_32_mib_reads_never_read_are_bounded_by_the_connection_budget() {
    let e = start(|a| a.metrics = Some("127.0.0.1:0".into())).await;
    let loc = big_file(&e, "big").await;
    let before = rss();

    // 48 reads of the whole file in one burst; not a byte of a reply read.
    let mut attacker = hello(e.server.addr).await;
    let read = Request::Read { loc: loc.clone(), offset: 0, size: 32 * MIB as u32 };
    let burst: Vec<u8> = (0..48).flat_map(|i| frame(i, &read)).collect();
    attacker.write_all(&burst).await.unwrap();
    let stats = e.server.rpc_stats.clone();
    until("a reply held", || stats.buffered_bytes() >= 32 * MIB).await;

    // The gateway is served meanwhile, a whole-file read included.
    for _ in 0..3 {
        e.gw.getattr(&loc).await.unwrap();
        assert_eq!(e.gw.read(&loc, 0, 32 * MIB as u32).await.unwrap().len(), 32 * MIB);
    }
    let grown = rss().saturating_sub(before);
    eprintln!(
        "48 pipelined 32 MiB reads, replies unread: server holds {} MiB (peak {} MiB), RSS +{} MiB",
        stats.buffered_bytes() / MIB,
        stats.peak_buffered_bytes() / MIB,
        grown / MIB
    );
    // one connection's budget (64 MiB) plus the gateway's own 32 MiB read
    assert!(stats.peak_buffered_bytes() <= 64 * MIB + 33 * MIB, "peak {}", stats.peak_buffered_bytes());
    assert!(grown < 256 * MIB, "RSS grew {} MiB (unbounded: 1.5 GiB)", grown / MIB);

    // Replies that do not move for the idle timeout: closed, memory back.
    until("the stalled connection closed", || stats.closed(Close::Stalled) == 1).await;
    until("its memory given back", || stats.buffered_bytes() == 0).await;
    let m = scrape(&e.server).await;
    assert!(m.contains(r#"imca_storage_rpc_connections_closed_total{reason="stalled"} 1"#), "{m}");
    assert!(m.contains("imca_storage_rpc_buffered_bytes 0"), "{m}");
    e.gw.getattr(&loc).await.unwrap();
    drop(attacker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_frames_on_24_connections_are_bounded_by_the_server_pool() {
    let e = start(|a| a.rpc.rpc_memory = 128 * MIB).await; // 96 MiB for large frames
    let f = nf("small");
    e.gw.create(&root(), &f, 0).await.unwrap();
    e.gw.write(&at("small", f.fid), 0, Bytes::from_static(b"hello")).await.unwrap();
    let body = std::sync::Arc::new(vec![1u8; 60 * MIB]);
    let before = rss();

    // 24 connections each announcing a 61 MiB write and sending 60 MiB of it.
    let mut attackers = Vec::new();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for i in 0..24u64 {
        let mut c = hello(e.server.addr).await;
        let mut head = Vec::new();
        head.extend_from_slice(&((12 + 61 * MIB) as u32).to_le_bytes());
        head.extend_from_slice(&i.to_le_bytes());
        head.extend_from_slice(&16u32.to_le_bytes());
        c.write_all(&head).await.unwrap();
        let (body, sent) = (body.clone(), sent.clone());
        attackers.push(tokio::spawn(async move {
            if c.write_all(&body).await.is_ok() {
                sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            c
        }));
    }
    let stats = e.server.rpc_stats.clone();
    until("24 connections", || stats.connections() == 25).await;
    until("one frame admitted and received", || sent.load(std::sync::atomic::Ordering::SeqCst) >= 1).await;
    // The gateway's small operations go on meanwhile.
    let t = Instant::now();
    assert_eq!(&e.gw.read(&at("small", f.fid), 0, 100).await.unwrap()[..], b"hello");
    e.gw.statfs(&root()).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
    let grown = rss().saturating_sub(before);
    eprintln!(
        "24 unfinished 61 MiB frames: server holds {} MiB (peak {} MiB), RSS +{} MiB",
        stats.buffered_bytes() / MIB,
        stats.peak_buffered_bytes() / MIB,
        grown / MIB
    );
    assert!(stats.peak_buffered_bytes() <= 128 * MIB, "peak {}", stats.peak_buffered_bytes());
    assert!(grown < 192 * MIB, "RSS grew {} MiB (unbounded: 1.4 GiB)", grown / MIB);
    // Frames that stop arriving are closed after the idle timeout.
    until("a stalled frame closed", || stats.closed(Close::Stalled) >= 1).await;
    for a in attackers {
        a.abort();
    }
}

#[tokio::test]
async fn silent_half_hello_and_idle_sockets_do_not_lock_gateways_out() {
    let e = start(|a| {
        a.max_connections = 16;
        // longer than the 1 s after which a quiet connection may be evicted
        a.rpc.idle_timeout = Duration::from_secs(3);
    })
    .await;
    let addr = e.server.addr;
    // 200 sockets that never finish the hello (half of them send part of it)…
    let mut silent = Vec::new();
    for i in 0..200 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 1 {
            s.write_all(b"IMCA").await.unwrap();
        }
        silent.push(s);
    }
    // …and every connection slot taken by sockets idle after the hello.
    let mut idle = Vec::new();
    for _ in 0..15 {
        idle.push(hello(addr).await);
    }
    let stats = e.server.rpc_stats.clone();
    assert_eq!(stats.connections(), 16); // with the gateway from `start`
    assert!(stats.handshakes() <= transport::tcp::DEFAULT_MAX_HANDSHAKES);

    // New gateways still get in, and work.
    let f = nf("f");
    let mut gateways = Vec::new();
    for i in 0..3 {
        let g = protocol_client::connect(&addr.to_string(), gateway()).await.unwrap();
        if i == 0 {
            g.create(&root(), &f, 0).await.unwrap();
        }
        g.getattr(&at("f", f.fid)).await.unwrap();
        gateways.push(g);
    }
    assert!(stats.closed(Close::Evicted) >= 3, "idle connections made room");
    assert!(stats.closed(Close::HandshakeEvicted) >= 200 - 64, "the handshake slots stayed capped");
    // The idle ones that are left are closed by the idle timeout, the
    // silent ones by the handshake deadline (5 s).
    until("idle connections closed", || stats.closed(Close::Idle) >= 10).await;
    until("unfinished hellos closed", || stats.handshakes() == 0).await;
    // The first gateway, quiet all along, is not broken by any of it.
    e.gw.getattr(&at("f", f.fid)).await.unwrap();
}

#[tokio::test]
async fn a_quiet_gateway_keeps_working_across_idle_timeouts() {
    let e = start(|a| a.rpc.idle_timeout = Duration::from_millis(300)).await;
    let f = nf("f");
    e.gw.create(&root(), &f, 0).await.unwrap();
    for i in 0..4u8 {
        e.gw.write(&at("f", f.fid), i as u64, Bytes::from(vec![b'a' + i])).await.unwrap();
        // quiet for longer than the idle timeout: the point of the test
        tokio::time::sleep(Duration::from_millis(450)).await;
    }
    assert_eq!(&e.gw.read(&at("f", f.fid), 0, 10).await.unwrap()[..], b"abcd");
    assert!(e.server.rpc_stats.closed(Close::Idle) >= 3);
}
