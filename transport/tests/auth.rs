//! The authenticated hello over real sockets against a real in-process
//! server: the right key is served; a wrong key, no key, a forged proof and
//! an impostor server are each refused with an error that says which, and
//! the server's service is never called for a peer that did not prove it
//! holds the volume's key.

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use transport::tcp::{self, handshake, Close, Hello, ServerOptions, ServerStats, TcpClient, TcpClientOptions};
use transport::{Message, RpcClient, RpcService, TransportError};

/// Counts what it serves: nothing may reach it unauthenticated.
#[derive(Default)]
struct Counting(AtomicUsize);

#[async_trait]
impl RpcService for Counting {
    async fn handle(&self, _req: Message) -> Message {
        self.0.fetch_add(1, SeqCst);
        Message::new(Bytes::from_static(b"pong"), Bytes::new())
    }
}

fn key(b: u8) -> secret::Key {
    secret::Secret::from_bytes(&[b; 32]).unwrap().key(secret::Purpose::RpcHandshake)
}

async fn server(auth: Option<secret::Key>) -> (String, Arc<Counting>, Arc<ServerStats>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let svc = Arc::new(Counting::default());
    let stats = Arc::new(ServerStats::default());
    let opts = ServerOptions { auth, stats: stats.clone(), ..Default::default() };
    tokio::spawn(tcp::serve(l, svc.clone(), opts, std::future::pending()));
    (addr, svc, stats)
}

fn client(addr: &str, auth: Option<secret::Key>) -> TcpClient {
    TcpClient::new(addr, TcpClientOptions { call_timeout: Duration::from_secs(10), auth, ..Default::default() })
}

/// Poll `cond` (the server counts a refusal after it has said no).
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn ping() -> Message {
    Message::new(Bytes::from_static(b"ping"), Bytes::new())
}

fn auth_error(r: Result<Message, TransportError>) -> String {
    match r {
        Err(TransportError::Auth(m)) => m,
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_volume_key_is_served_and_every_other_peer_is_refused() {
    let (addr, svc, stats) = server(Some(key(1))).await;
    let good = client(&addr, Some(key(1)));
    assert_eq!(&good.call(ping(), 0).await.unwrap().head[..], b"pong");

    let m = auth_error(client(&addr, Some(key(2))).call(ping(), 0).await);
    assert!(m.contains("does not hold this volume's secret"), "{m}");
    let m = auth_error(client(&addr, None).call(ping(), 0).await);
    assert!(m.contains("requires the volume's credentials"), "{m}");
    until("the server counts the keyless client as refused", || stats.closed(Close::AuthFailed) == 1).await;
    assert_eq!(svc.0.load(SeqCst), 1, "only the authenticated call was served");
    // and the good client goes on working
    assert!(good.call(ping(), 0).await.is_ok());
}

#[tokio::test]
async fn a_forged_proof_is_refused_before_any_frame_is_read() {
    let (addr, svc, stats) = server(Some(key(1))).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let mut hello = Hello::ours(tcp::DEFAULT_MAX_FRAME, None);
    hello.flags = 1; // claims to authenticate
    s.write_all(&hello.encode()).await.unwrap();
    let mut theirs = [0u8; tcp::HELLO_LEN];
    s.read_exact(&mut theirs).await.unwrap();
    // A guessed proof, and a request right behind it.
    s.write_all(&[0x42; tcp::PROOF_LEN]).await.unwrap();
    let mut frame = Vec::new();
    frame.extend_from_slice(&16u32.to_le_bytes());
    frame.extend_from_slice(&1u64.to_le_bytes());
    frame.extend_from_slice(&4u32.to_le_bytes());
    frame.extend_from_slice(b"ping");
    let _ = s.write_all(&frame).await;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await.unwrap();
    assert_eq!(rest.len(), tcp::HELLO_PREFIX, "only the verdict comes back: {rest:?}");
    assert_eq!(u16::from_le_bytes([rest[6], rest[7]]), 4, "status: authentication failed");
    until("the forged proof counted", || stats.closed(Close::AuthFailed) == 1).await;
    assert_eq!(svc.0.load(SeqCst), 0, "nothing was served");
}

#[tokio::test]
async fn a_client_with_a_key_refuses_an_insecure_or_impostor_server() {
    let (addr, svc, _) = server(None).await;
    let m = auth_error(client(&addr, Some(key(1))).call(ping(), 0).await);
    assert!(m.contains("does not authenticate"), "{m}");
    assert_eq!(svc.0.load(SeqCst), 0);
    // Insecure on both ends still works (the `--insecure` measurement mode).
    assert!(client(&addr, None).call(ping(), 0).await.is_ok());

    // An impostor that claims to authenticate but cannot prove it.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let impostor = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let mut h = [0u8; tcp::HELLO_LEN];
            if s.read_exact(&mut h).await.is_err() {
                continue;
            }
            let mut ours = Hello::ours(tcp::DEFAULT_MAX_FRAME, None);
            ours.flags = 1;
            ours.proof = [7; 32];
            let _ = s.write_all(&ours.encode()).await;
        }
    });
    let m = auth_error(client(&impostor, Some(key(1))).call(ping(), 0).await);
    assert!(m.contains("failed authentication"), "{m}");
}

#[tokio::test]
async fn the_raw_handshake_helper_authenticates_too() {
    let (addr, _, _) = server(Some(key(3))).await;
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let h = handshake::client(&mut s, &addr, 1 << 20, Some(&key(3))).await.unwrap();
    assert!(h.authenticates());
    let mut s = TcpStream::connect(&addr).await.unwrap();
    assert!(matches!(handshake::client(&mut s, &addr, 1 << 20, Some(&key(4))).await, Err(TransportError::Auth(_))));
}
