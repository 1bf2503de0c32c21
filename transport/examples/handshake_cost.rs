//! What authenticating a storage RPC connection costs: connect + hello (+
//! proofs) + one null call, N times, against a server with the volume key and
//! one without (`--insecure`), alternated, over loopback TCP.
//!
//! ```text
//! cargo run --release -p transport --example handshake_cost -- [N]
//! ```
//! Calls on an established connection cost the same either way: the
//! handshake is the only per-connection work (TLS aside).

use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;
use transport::tcp::{self, ServerOptions, TcpClient, TcpClientOptions};
use transport::{Message, RpcClient, RpcService};

struct Null;

#[async_trait]
impl RpcService for Null {
    async fn handle(&self, _req: Message) -> Message {
        Message::default()
    }
}

async fn server(auth: Option<secret::Key>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(tcp::serve(l, Arc::new(Null), ServerOptions { auth, ..Default::default() }, std::future::pending()));
    addr
}

/// µs per (connect + handshake + one call) and per call on a kept connection.
async fn run(addr: &str, auth: Option<secret::Key>, n: usize) -> (f64, f64) {
    let opts = TcpClientOptions { auth, ..Default::default() };
    let t = Instant::now();
    for _ in 0..n {
        let c = TcpClient::new(addr, opts.clone());
        c.call(Message::default(), 0).await.unwrap();
    }
    let connect = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let c = TcpClient::new(addr, opts);
    let t = Instant::now();
    for _ in 0..n {
        c.call(Message::new(Bytes::from_static(b"x"), Bytes::new()), 0).await.unwrap();
    }
    (connect, t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let key = secret::Secret::generate().key(secret::Purpose::RpcHandshake);
    let (secure, insecure) = (server(Some(key.clone())).await, server(None).await);
    println!("| round | connect+hello+call, key (µs) | same, --insecure (µs) | call on an open connection, key / insecure (µs) |");
    println!("|---|---|---|---|");
    for round in 1..=3 {
        let (sc, s1) = run(&secure, Some(key.clone()), n).await;
        let (ic, i1) = run(&insecure, None, n).await;
        println!("| {round} | {sc:.1} | {ic:.1} | {s1:.1} / {i1:.1} |");
    }
}
