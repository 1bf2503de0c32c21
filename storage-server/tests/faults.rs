//! Servers that die, hang, receive garbage, or run out of space.

mod common;
use bytes::Bytes;
use common::*;
use protocol_client::{ClientOptions, ProtocolClient};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use xlator::*;

#[tokio::test]
async fn killed_server_fails_fast_then_reconnects_on_the_same_port() {
    let e = env().await;
    let c = &e.c;
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    c.write(&at("f", f.fid), 0, Bytes::from_static(b"before")).await.unwrap();
    let addr = e.server.addr;
    e.server.kill().await;

    let t = Instant::now();
    assert_eq!(c.getattr(&at("f", f.fid)).await.unwrap_err(), FsError::EIO);
    assert_eq!(c.read(&at("f", f.fid), 0, 10).await.unwrap_err(), FsError::EIO);
    assert!(t.elapsed() < Duration::from_secs(5), "a dead server must fail promptly, took {:?}", t.elapsed());

    let mut args = common::args(&e.export);
    args.listen = addr.to_string();
    let s2 = storage_server::start(args).await.unwrap();
    assert_eq!(&c.read(&at("f", f.fid), 0, 10).await.unwrap()[..], b"before");
    c.write(&at("f", f.fid), 6, Bytes::from_static(b" after")).await.unwrap();
    assert_eq!(std::fs::read(e.export.join("f")).unwrap(), b"before after");
    s2.shutdown().await;
}

#[tokio::test]
async fn hung_server_gives_eio_within_the_timeout() {
    // Accepts connections and reads, but never answers: neither the hello
    // nor any request.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            keep.push(s);
        }
    });
    let opts = ClientOptions { op_timeout: Duration::from_millis(500), ..common::opts() };
    let c = ProtocolClient::lazy(&addr, opts.clone());
    let t = Instant::now();
    assert_eq!(c.getattr(&root()).await.unwrap_err(), FsError::EIO);
    assert_eq!(c.read(&path("x"), 0, 1).await.unwrap_err(), FsError::EIO);
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    assert!(protocol_client::connect(&addr, opts).await.is_err());

    // One that completes the hello, then goes silent.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut keep = Vec::new();
        while let Ok((mut s, _)) = l.accept().await {
            transport::tcp::handshake::accept(&mut s, 1 << 20, Some(&common::key())).await.unwrap().unwrap();
            keep.push(s);
        }
    });
    let c = ProtocolClient::lazy(&addr, ClientOptions { op_timeout: Duration::from_millis(500), ..common::opts() });
    let t = Instant::now();
    assert_eq!(c.statfs(&root()).await.unwrap_err(), FsError::EIO);
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
}

#[tokio::test]
async fn garbage_frames_drop_only_that_connection() {
    let e = env().await;
    let addr = e.server.addr;
    for junk in [&b"\x00\x01\x02\x03garbage garbage garbage"[..], b"IMCA\x01\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00"] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(junk).await.unwrap();
        let mut buf = vec![0u8; 64];
        // The server answers at most a hello, then closes.
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "the server must drop a connection sending garbage");
    }
    // A valid frame with an undecodable head gets EPROTO, connection kept.
    let rpc = transport::tcp::TcpClient::connect(
        addr.to_string(),
        transport::tcp::TcpClientOptions { auth: Some(common::key()), ..Default::default() },
    ).await.unwrap();
    use transport::RpcClient;
    let r = rpc.call(transport::Message::new(Bytes::from_static(&[250, 1, 2]), Bytes::new()), 0).await.unwrap();
    assert_eq!(wire::decode_reply(&r).unwrap().result.unwrap_err(), FsError(libc::EPROTO));
    // Everyone else is still served.
    e.c.getattr(&root()).await.unwrap();
    let again = protocol_client::connect(&addr.to_string(), common::opts()).await.unwrap();
    again.statfs(&root()).await.unwrap();
}

#[tokio::test]
async fn full_disk_gives_enospc_and_corrupts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("small"), "1m");
    let server = storage_server::start(common::args(&fs.0)).await.unwrap();
    let c = protocol_client::connect(&server.addr.to_string(), common::opts()).await.unwrap();
    let keep = nf("keep");
    c.create(&root(), &keep, 0).await.unwrap();
    c.write(&at("keep", keep.fid), 0, Bytes::from_static(b"precious")).await.unwrap();

    let big = nf("big");
    c.create(&root(), &big, 0).await.unwrap();
    let chunk = Bytes::from(vec![0xabu8; 256 * 1024]);
    let mut off = 0u64;
    let err = loop {
        match c.write(&at("big", big.fid), off, chunk.clone()).await {
            Ok(w) => {
                assert!(w.written > 0);
                off += w.written as u64;
                assert!(off < 4 << 20, "a 1 MiB file system accepted {off} bytes");
            }
            Err(e) => break e,
        }
    };
    assert_eq!(err, FsError::ENOSPC);
    // Creating more also fails cleanly (no half-made file is left).
    let mut more = 0;
    loop {
        match c.mkdir(&root(), &nf(&format!("d{more}"))).await {
            Ok(_) => more += 1,
            Err(e) => {
                assert!(e == FsError::ENOSPC, "{e:?}");
                break;
            }
        }
        assert!(more < 5000);
    }
    assert_eq!(&c.read(&at("keep", keep.fid), 0, 100).await.unwrap()[..], b"precious");
    assert_eq!(c.getattr(&at("big", big.fid)).await.unwrap().size, off);
    // Freeing space makes writes work again.
    c.unlink(&root(), "big").await.unwrap();
    c.write(&at("keep", keep.fid), 8, Bytes::from_static(b"!")).await.unwrap();
    assert_eq!(&c.read(&at("keep", keep.fid), 0, 100).await.unwrap()[..], b"precious!");
    server.shutdown().await;
    drop(fs);
}

#[tokio::test]
async fn volume_config_compare_and_set_and_epoch_watch() {
    let e = env().await;
    let other = protocol_client::connect(&e.server.addr.to_string(), common::opts()).await.unwrap();
    let cur = e.c.fetch_volume_config().await.unwrap();
    assert_eq!(cur.epoch, 1);
    assert_eq!(e.c.epoch(), 1);
    let mut watch = other.epoch_watch();
    watch.borrow_and_update();

    let mut next = cur.clone();
    next.nodes = vec!["127.0.0.1:11211".into()];
    next.block_size = 64 * 1024;
    next.epoch = cur.epoch; // not +1: refused
    let (ok, kept) = e.c.set_volume_config(next.clone()).await.unwrap();
    assert!(!ok);
    assert_eq!(kept, cur);
    next.epoch = cur.epoch + 1;
    let (ok, kept) = e.c.set_volume_config(next.clone()).await.unwrap();
    assert!(ok);
    assert_eq!(kept, next);
    assert_eq!(e.c.epoch(), 2);
    // A racing second writer with the same epoch loses and learns the winner.
    let (ok, kept) = other.set_volume_config(next.clone()).await.unwrap();
    assert!(!ok);
    assert_eq!(kept, next);
    assert!(watch.has_changed().unwrap(), "any reply carries the new epoch");
    assert_eq!(*watch.borrow_and_update(), 2);
    // Persisted, and the server's watch handle saw it.
    assert_eq!(e.server.volume.current(), next);
    let on_disk: volume::CacheConfig =
        serde_json::from_slice(&std::fs::read(e.export.join(".imca/volume.json")).unwrap()).unwrap();
    assert_eq!(on_disk, next);
    // Invalid block size: refused.
    let mut bad = next.clone();
    bad.epoch = 3;
    bad.block_size = 3000;
    assert!(!e.c.set_volume_config(bad).await.unwrap().0);
}

#[tokio::test]
async fn cache_nodes_flag_and_ready_file_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("x");
    std::fs::create_dir(&export).unwrap();
    let ready = dir.path().join("ready.json");
    let mut args = common::args(&export);
    args.metrics = Some("127.0.0.1:0".into());
    args.ready_file = Some(ready.clone());
    args.cache_nodes = Some(vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()]);
    let s = storage_server::start(args.clone()).await.unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    assert_eq!(r["addr"], s.addr.to_string());
    let murl = r["metrics"].as_str().unwrap().to_string();
    assert_eq!(s.volume.current().nodes, vec!["127.0.0.1:1", "127.0.0.1:2"]);
    assert_eq!(s.volume.epoch(), 2);
    let c = protocol_client::connect(&s.addr.to_string(), common::opts()).await.unwrap();
    c.create(&root(), &nf("f"), 0).await.unwrap();
    let _ = c.lookup(&root(), "nope").await;
    let body = http_get(&murl).await;
    assert!(body.contains(r#"imca_storage_ops_total{op="create",result="ok"} 1"#), "{body}");
    assert!(body.contains(r#"imca_storage_ops_total{op="lookup",result="error"} 1"#), "{body}");
    assert!(body.contains("imca_storage_op_duration_seconds_bucket"), "{body}");
    s.shutdown().await;
    // Restart with the same pool: no epoch bump; with a new pool: bump.
    let s = storage_server::start(args.clone()).await.unwrap();
    assert_eq!(s.volume.epoch(), 2);
    s.shutdown().await;
    args.cache_nodes = Some(vec!["127.0.0.1:1".into()]);
    let s = storage_server::start(args).await.unwrap();
    assert_eq!(s.volume.epoch(), 3);
    s.shutdown().await;
}

async fn http_get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (hostport, path) = rest.split_once('/').unwrap();
    let mut s = TcpStream::connect(hostport).await.unwrap();
    s.write_all(format!("GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}
