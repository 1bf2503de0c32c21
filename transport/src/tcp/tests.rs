//! Real sockets on 127.0.0.1:0, real server, real client.

use super::frame::{decode, encode_frame, Decoded};
use super::*;
use crate::{Message, RpcClient, RpcService, TransportError};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Echoes the request, reversing head; a head of "sleep" waits 300 ms first.
struct Echo;

#[async_trait]
impl RpcService for Echo {
    async fn handle(&self, req: Message) -> Message {
        if &req.head[..] == b"sleep" {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let mut h = req.head.to_vec();
        h.reverse();
        Message::new(Bytes::from(h), req.bulk)
    }
}

struct Server {
    addr: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start_on(addr: &str) -> Server {
        let l = TcpListener::bind(addr).await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (stop, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(l, Arc::new(Echo), ServerOptions::default(), async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Server { addr, stop: Some(stop), task }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
    }
}

fn opts(timeout_ms: u64) -> TcpClientOptions {
    TcpClientOptions { call_timeout: Duration::from_millis(timeout_ms), ..Default::default() }
}

/// Our hello, as a raw client or a fake server sends it.
fn hello_bytes() -> Vec<u8> {
    Hello::ours(DEFAULT_MAX_FRAME, None).wire()
}

fn msg(h: &str, bulk: Vec<u8>) -> Message {
    Message::new(Bytes::copy_from_slice(h.as_bytes()), Bytes::from(bulk))
}

#[test]
fn frame_round_trip_and_incomplete() {
    let m = msg("head", vec![7u8; 1000]);
    let f = encode_frame(42, &m);
    for cut in [0, 3, 4, 15, 16, f.len() - 1] {
        let mut b = BytesMut::from(&f[..cut]);
        assert!(matches!(decode(&mut b, 1 << 20), Decoded::Incomplete(_)), "cut {cut}");
    }
    let mut b = BytesMut::from(&f[..]);
    b.extend_from_slice(&f);
    assert_eq!(decode(&mut b, 1 << 20), Decoded::Complete(42, m.clone()));
    assert_eq!(decode(&mut b, 1 << 20), Decoded::Complete(42, m));
    assert!(b.is_empty());
}

#[test]
fn frame_rejects_absurd_lengths() {
    let mut b = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 0, 0][..]);
    assert!(matches!(decode(&mut b, 1 << 20), Decoded::Invalid(_)));
    let mut b = BytesMut::from(&[3, 0, 0, 0, 0, 0, 0][..]);
    assert!(matches!(decode(&mut b, 1 << 20), Decoded::Invalid(_)));
    // head_len larger than the frame body
    let mut f = encode_frame(1, &msg("ab", vec![])).to_vec();
    f[12] = 200;
    let mut b = BytesMut::from(&f[..]);
    assert!(matches!(decode(&mut b, 1 << 20), Decoded::Invalid(_)));
}

#[tokio::test]
async fn many_calls_in_flight_on_one_connection() {
    let s = Server::start_on("127.0.0.1:0").await;
    let c = Arc::new(TcpClient::connect(&s.addr, opts(10_000)).await.unwrap());
    // A slow call must not hold up quick ones behind it.
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.call(msg("sleep", vec![]), 0).await })
    };
    let mut calls = Vec::new();
    for i in 0..200u32 {
        let c = c.clone();
        calls.push(tokio::spawn(async move {
            let bulk = vec![i as u8; (i as usize) * 517];
            let r = c.call(msg(&format!("h{i}"), bulk.clone()), 1 << 20).await.unwrap();
            assert_eq!(&r.head[..], format!("h{i}").chars().rev().collect::<String>().as_bytes());
            assert_eq!(&r.bulk[..], &bulk[..]);
        }));
    }
    let t = Instant::now();
    for c in calls {
        c.await.unwrap();
    }
    assert!(!slow.is_finished() || t.elapsed() < Duration::from_millis(300));
    assert_eq!(&slow.await.unwrap().unwrap().head[..], b"peels");
    // A 16 MiB bulk both ways.
    let big: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
    let r = c.call(msg("big", big.clone()), 16 << 20).await.unwrap();
    assert!(r.bulk == big);
    s.stop().await;
}

#[tokio::test]
async fn garbage_drops_only_that_connection() {
    let s = Server::start_on("127.0.0.1:0").await;
    let good = TcpClient::connect(&s.addr, opts(10_000)).await.unwrap();

    // Not even a hello.
    let mut raw = TcpStream::connect(&s.addr).await.unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), raw.read_to_end(&mut sink)).await.unwrap();

    // A good hello, then an absurd length: the server must close on us.
    let mut raw = TcpStream::connect(&s.addr).await.unwrap();
    handshake::client(&mut raw, &s.addr, DEFAULT_MAX_FRAME, None).await.unwrap();
    let mut h = [0u8; HELLO_LEN];
    raw.write_all(&[0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8]).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(10), raw.read(&mut h)).await.unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "server should have closed the connection");

    // A truncated frame followed by EOF.
    let mut raw = TcpStream::connect(&s.addr).await.unwrap();
    handshake::client(&mut raw, &s.addr, DEFAULT_MAX_FRAME, None).await.unwrap();
    let f = encode_frame(9, &msg("x", vec![1; 100]));
    raw.write_all(&f[..50]).await.unwrap();
    raw.shutdown().await.unwrap();

    // The well-behaved client is still served.
    let r = good.call(msg("ok", vec![1, 2, 3]), 16).await.unwrap();
    assert_eq!(&r.head[..], b"ko");
    s.stop().await;
}

#[tokio::test]
async fn version_mismatch_is_refused_clearly() {
    let s = Server::start_on("127.0.0.1:0").await;
    for version in [99u8, 2] {
        // a newer client, and a version-2 one (whose hello was 8 bytes)
        let mut raw = TcpStream::connect(&s.addr).await.unwrap();
        let mut bad = hello_bytes();
        bad[4] = version;
        let len = if version == 2 { 8 } else { HELLO_LEN };
        raw.write_all(&bad[..len]).await.unwrap();
        let mut h = Vec::new();
        raw.read_to_end(&mut h).await.unwrap();
        assert_eq!(h.len(), 8, "a refusal is the 8 bytes every version reads");
        assert_eq!(u16::from_le_bytes([h[6], h[7]]), 1, "status must say refused");
    }

    // And a client facing a server of another version gets a Protocol error.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut h = [0u8; 8];
        s.read_exact(&mut h).await.unwrap();
        let mut reply = Hello::refusal(1).wire();
        reply[4] = 7;
        s.write_all(&reply).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    match TcpClient::connect(&addr, opts(5000)).await {
        Err(TransportError::Protocol(m)) => assert!(m.contains("version"), "{m}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a mismatched server was accepted"),
    }
    s.stop().await;
}

#[tokio::test]
async fn silent_server_times_out() {
    // Accepts and completes the hello, then never answers anything.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            handshake::accept(&mut s, DEFAULT_MAX_FRAME, None).await.unwrap().unwrap();
            keep.push(s);
        }
    });
    let c = TcpClient::connect(&addr, opts(300)).await.unwrap();
    let t = Instant::now();
    assert!(matches!(c.call(msg("x", vec![]), 0).await, Err(TransportError::Timeout(_))));
    assert!(t.elapsed() < Duration::from_secs(5));

    // One that accepts but never even says hello: the call still times out.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        loop {
            keep.push(l.accept().await.unwrap());
        }
    });
    let c = TcpClient::new(&addr, opts(300));
    let t = Instant::now();
    assert!(c.call(msg("x", vec![]), 0).await.is_err());
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn reconnects_after_server_restart() {
    let s = Server::start_on("127.0.0.1:0").await;
    let addr = s.addr.clone();
    let c = TcpClient::connect(&addr, opts(5000)).await.unwrap();
    assert!(c.call(msg("a", vec![]), 0).await.is_ok());
    s.stop().await;

    // Dead server: calls fail promptly, they do not wait for the timeout.
    let t = Instant::now();
    assert!(c.call(msg("a", vec![]), 0).await.is_err());
    assert!(c.call(msg("a", vec![]), 0).await.is_err());
    assert!(t.elapsed() < Duration::from_secs(4), "took {:?}", t.elapsed());

    let s = Server::start_on(&addr).await;
    let r = c.call(msg("back", vec![]), 0).await.unwrap();
    assert_eq!(&r.head[..], b"kcab");
    s.stop().await;
}

#[tokio::test]
async fn a_silent_connection_is_replaced_after_a_timeout() {
    // First connection: hello, then silence (a hung peer or a half-open
    // socket). Later connections: a minimal echo server.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        let mut n = 0;
        while let Ok((mut s, _)) = l.accept().await {
            n += 1;
            handshake::accept(&mut s, DEFAULT_MAX_FRAME, None).await.unwrap().unwrap();
            if n == 1 {
                keep.push(s);
                continue;
            }
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                loop {
                    match decode(&mut buf, 1 << 20) {
                        Decoded::Complete(id, m) => s.write_all(&encode_frame(id, &m)).await.unwrap(),
                        Decoded::Incomplete(_) => {
                            if s.read_buf(&mut buf).await.unwrap() == 0 {
                                return;
                            }
                        }
                        Decoded::Invalid(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    let c = TcpClient::connect(&addr, opts(300)).await.unwrap();
    assert!(matches!(c.call(msg("x", vec![]), 0).await, Err(TransportError::Timeout(_))));
    let r = c.call(msg("again", vec![1]), 0).await.unwrap();
    assert_eq!(&r.head[..], b"again", "the next call used a fresh connection");
}

/// Counts how many requests it serves at once.
struct Gauge {
    now: std::sync::atomic::AtomicUsize,
    max: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl RpcService for Gauge {
    async fn handle(&self, req: Message) -> Message {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.now.fetch_add(1, SeqCst) + 1;
        self.max.fetch_max(n, SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, SeqCst);
        req
    }
}

#[tokio::test]
async fn in_flight_requests_per_connection_are_bounded() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let g = Arc::new(Gauge { now: Default::default(), max: Default::default() });
    let svc: Arc<dyn RpcService> = g.clone();
    let server_opts = ServerOptions { max_in_flight: 3, ..Default::default() };
    tokio::spawn(serve(l, svc, server_opts, std::future::pending()));
    let c = Arc::new(TcpClient::connect(&addr, opts(20_000)).await.unwrap());
    let calls: Vec<_> = (0..30)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.call(msg(&format!("{i}"), vec![0; 1000]), 0).await.unwrap() })
        })
        .collect();
    for (i, h) in calls.into_iter().enumerate() {
        assert_eq!(h.await.unwrap().head, format!("{i}").as_bytes());
    }
    let max = g.max.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=3).contains(&max), "served {max} at once with a bound of 3");
}

#[tokio::test]
async fn an_unreachable_peer_is_not_retried_by_every_call() {
    // Accepts but never completes the hello: connecting times out.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok(s) = l.accept().await {
            keep.push(s);
        }
    });
    let o = TcpClientOptions {
        call_timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_millis(300),
        reconnect_backoff: Duration::from_millis(1500),
        ..Default::default()
    };
    let c = TcpClient::new(&addr, o);
    let t = Instant::now();
    assert!(matches!(c.call(msg("x", vec![]), 0).await, Err(TransportError::Connect(_))));
    assert!(t.elapsed() >= Duration::from_millis(250));
    // Within the backoff: fails at once, without another connect attempt.
    let t = Instant::now();
    for _ in 0..10 {
        assert!(matches!(c.call(msg("x", vec![]), 0).await, Err(TransportError::Connect(_))));
    }
    assert!(t.elapsed() < Duration::from_millis(250), "took {:?}", t.elapsed());
    // After it: tries again (and waits for the connect timeout again).
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let t = Instant::now();
    assert!(c.call(msg("x", vec![]), 0).await.is_err());
    assert!(t.elapsed() >= Duration::from_millis(250));
}

/// Holds every request until the gate opens, then echoes it.
struct Gated(tokio::sync::Semaphore);

#[async_trait]
impl RpcService for Gated {
    async fn handle(&self, req: Message) -> Message {
        let _pass = self.0.acquire().await.unwrap();
        req
    }
}

/// A peer that stops reading (its handlers stuck) fills the socket: calls
/// then wait for room, and those given up while waiting (timed out,
/// dropped) leave no half frame behind: every later call is answered whole
/// and matched to its own reply.
#[tokio::test]
async fn calls_wait_for_room_and_a_cancelled_one_leaves_the_stream_whole() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let gate = Arc::new(Gated(tokio::sync::Semaphore::new(0)));
    let svc: Arc<dyn RpcService> = gate.clone();
    tokio::spawn(serve(l, svc, ServerOptions { max_in_flight: 2, ..Default::default() }, std::future::pending()));
    // 4 × 8 KiB may wait in the client before a call waits for room
    let c = Arc::new(TcpClient::connect(&addr, TcpClientOptions { queue_depth: 4, ..opts(30_000) }).await.unwrap());
    let body = |i: u32| vec![(i % 251) as u8; 256 << 10];
    let calls: Vec<_> = (0..24u32)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { (i, c.call(msg(&format!("c{i}"), body(i)), 1 << 20).await) })
        })
        .collect();
    // 6 MiB of calls against a socket buffer and 32 KiB of room: these
    // wait for room (or, if written, for an answer) and are given up.
    for _ in 0..50 {
        let quick = tokio::time::timeout(Duration::from_millis(20), c.call(msg("cut", body(7)), 1 << 20)).await;
        assert!(quick.is_err(), "answered behind a closed gate");
    }
    gate.0.add_permits(1 << 20);
    for h in calls {
        let (i, r) = h.await.unwrap();
        let r = r.unwrap();
        assert_eq!(&r.head[..], format!("c{i}").as_bytes());
        assert!(r.bulk == body(i), "call {i}'s reply carries its own bulk");
    }
    let r = c.call(msg("after", body(3)), 1 << 20).await.unwrap();
    assert_eq!(&r.head[..], b"after");
    assert!(r.bulk == body(3));
}
