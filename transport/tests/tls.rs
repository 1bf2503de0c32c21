//! TLS under the storage RPC and the client-network allow-list, over real
//! sockets: certificates made by `openssl` as an operator would, a recording
//! proxy between client and server to see what crosses the wire.

use async_trait::async_trait;
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use transport::tcp::tls::{ClientTls, ServerTls};
use transport::tcp::{self, Cidr, Close, ServerOptions, ServerStats, TcpClient, TcpClientOptions};
use transport::{Message, RpcClient, RpcService, TransportError};

struct Echo;

#[async_trait]
impl RpcService for Echo {
    async fn handle(&self, req: Message) -> Message {
        Message::new(Bytes::from_static(b"echo"), req.bulk)
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, made with
/// openssl as an operator would: (CA cert, server cert, server key).
fn cert(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let p = |ext: &str| dir.join(format!("{name}{ext}"));
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).output().expect("openssl (apt-get install openssl)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    let (ca, ca_key, csr, crt, key, ext) = (p("-ca.pem"), p("-ca.key"), p(".csr"), p(".pem"), p(".key"), p(".ext"));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[&["req", "-x509"], &ec[..], &["-days", "2", "-subj", "/CN=imca test CA", "-keyout", &s(&ca_key), "-out", &s(&ca)]].concat());
    run(&[&["req", "-new"], &ec[..], &["-subj", "/CN=imca-storage", "-keyout", &s(&key), "-out", &s(&csr)]].concat());
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n").unwrap();
    run(&["x509", "-req", "-in", &s(&csr), "-CA", &s(&ca), "-CAkey", &s(&ca_key), "-CAcreateserial", "-days", "2",
        "-extfile", &s(&ext), "-out", &s(&crt)]);
    (ca, crt, key)
}

fn key() -> secret::Key {
    secret::Secret::from_bytes(&[9; 32]).unwrap().key(secret::Purpose::RpcHandshake)
}

async fn server(opts: ServerOptions) -> (String, Arc<ServerStats>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let stats = opts.stats.clone();
    tokio::spawn(tcp::serve(l, Arc::new(Echo), opts, std::future::pending()));
    (addr, stats)
}

fn client(addr: &str, tls: Option<ClientTls>) -> TcpClient {
    TcpClient::new(addr, TcpClientOptions { call_timeout: Duration::from_secs(10), auth: Some(key()), tls, ..Default::default() })
}

/// Forwards one connection to `to`, keeping every byte that passes.
async fn recording_proxy(to: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    tokio::spawn(async move {
        while let Ok((a, _)) = l.accept().await {
            let b = TcpStream::connect(&to).await.unwrap();
            let (mut ar, mut aw) = a.into_split();
            let (mut br, mut bw) = b.into_split();
            let (r1, r2) = (rec.clone(), rec.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n @ 1..) = ar.read(&mut buf).await {
                    r1.lock().unwrap().extend_from_slice(&buf[..n]);
                    if bw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                while let Ok(n @ 1..) = br.read(&mut buf).await {
                    r2.lock().unwrap().extend_from_slice(&buf[..n]);
                    if aw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

const MARK: &[u8] = b"the-payload-nobody-else-should-read";

#[tokio::test]
async fn tls_hides_the_traffic_and_plain_tcp_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, c, k) = cert(dir.path(), "server");
    let tls = ServerTls::from_files(&c, &k).unwrap();
    let (addr, _) = server(ServerOptions { auth: Some(key()), tls: Some(tls), ..Default::default() }).await;
    let (via, seen) = recording_proxy(addr.clone()).await;
    // The certificate names 127.0.0.1, which the proxy's address is too.
    let ca = ClientTls::from_ca_file(&ca).unwrap();
    let r = client(&via, Some(ca)).call(Message::new(Bytes::from_static(b"x"), Bytes::from_static(MARK)), 1 << 20).await;
    assert_eq!(&r.unwrap().bulk[..], MARK);
    assert!(!contains(&seen.lock().unwrap(), MARK), "the payload crossed the wire in clear over TLS");
    assert!(!contains(&seen.lock().unwrap(), b"IMCA"), "even the hello is inside TLS");

    // The same through a plain server: the proxy sees it (the control).
    let (plain, _) = server(ServerOptions { auth: Some(key()), ..Default::default() }).await;
    let (via, seen) = recording_proxy(plain).await;
    client(&via, None).call(Message::new(Bytes::from_static(b"x"), Bytes::from_static(MARK)), 1 << 20).await.unwrap();
    assert!(contains(&seen.lock().unwrap(), MARK));
}

#[tokio::test]
async fn mismatched_tls_settings_fail_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, c, k) = cert(dir.path(), "server");
    let (other, _, _) = cert(dir.path(), "other");
    let (tls_addr, _) = server(ServerOptions { tls: Some(ServerTls::from_files(&c, &k).unwrap()), auth: Some(key()), ..Default::default() }).await;
    let (plain_addr, _) = server(ServerOptions { auth: Some(key()), ..Default::default() }).await;
    let msg = || Message::new(Bytes::from_static(b"x"), Bytes::new());

    let e = client(&tls_addr, None).call(msg(), 0).await.unwrap_err().to_string();
    assert!(e.contains("requires TLS"), "{e}");
    let e = client(&plain_addr, Some(ClientTls::from_ca_file(&ca).unwrap())).call(msg(), 0).await.unwrap_err().to_string();
    assert!(e.contains("TLS handshake failed"), "{e}");
    // A certificate from another CA: refused by the client.
    let e = client(&tls_addr, Some(ClientTls::from_ca_file(&other).unwrap())).call(msg(), 0).await.unwrap_err().to_string();
    assert!(e.contains("TLS handshake failed") && e.to_lowercase().contains("certificate"), "{e}");
    // Bad files are named in the error.
    let missing = dir.path().join("nope.pem");
    assert!(ServerTls::from_files(&missing, &k).unwrap_err().contains("nope.pem"));
    assert!(ClientTls::from_ca_file(&k).unwrap_err().contains("no certificate"), "a key file is not a CA file");
}

#[tokio::test]
async fn only_allowed_networks_may_connect() {
    let stats = Arc::new(ServerStats::default());
    let elsewhere: Cidr = "10.0.0.0/8".parse().unwrap();
    let (addr, _) = server(ServerOptions { allow: vec![elsewhere], stats: stats.clone(), ..Default::default() }).await;
    let c = TcpClient::new(&addr, TcpClientOptions { call_timeout: Duration::from_secs(5), ..Default::default() });
    let r = c.call(Message::new(Bytes::from_static(b"x"), Bytes::new()), 0).await;
    assert!(matches!(r, Err(TransportError::Connect(_) | TransportError::Disconnected(_))), "{r:?}");
    assert_eq!(stats.closed(Close::NotAllowed), 1);

    let here: Cidr = "127.0.0.0/8".parse().unwrap();
    let (addr, _) = server(ServerOptions { allow: vec![elsewhere, here], ..Default::default() }).await;
    let c = TcpClient::new(&addr, TcpClientOptions::default());
    assert!(c.call(Message::new(Bytes::from_static(b"x"), Bytes::new()), 0).await.is_ok());
}
