//! Two storage servers in one process: each `/metrics` serves its own
//! registry (protocol-server, SMCache, open fds), nothing is registered
//! process-wide, and a second server registers the same names without
//! colliding with the first.

mod common;
use bytes::Bytes;
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use xlator::*;

async fn scrape(s: &storage_server::Server) -> String {
    let addr = s.metrics_addr.expect("--metrics given");
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn two_servers_in_one_process_keep_their_metrics_apart() {
    let dir = tempfile::tempdir().unwrap();
    let start = |name: &str, nodes: Option<Vec<String>>| {
        let export = dir.path().join(name);
        std::fs::create_dir(&export).unwrap();
        let mut args = common::args(&export);
        args.metrics = Some("127.0.0.1:0".into());
        // a cache node that refuses: SMCache still counts its queued populates
        args.cache_nodes = nodes;
        storage_server::start(args)
    };
    let a = start("a", Some(vec!["127.0.0.1:1".into()])).await.unwrap();
    let b = start("b", None).await.unwrap();
    let ca = protocol_client::connect(&a.addr.to_string(), common::opts()).await.unwrap();
    let cb = protocol_client::connect(&b.addr.to_string(), common::opts()).await.unwrap();
    let f = nf("f");
    ca.create(&root(), &f, 0).await.unwrap();
    ca.write(&at("f", f.fid), 0, Bytes::from_static(b"some data")).await.unwrap();
    ca.read(&at("f", f.fid), 0, 100).await.unwrap();
    cb.create(&root(), &nf("g"), 0).await.unwrap();

    let (ma, mb) = (scrape(&a).await, scrape(&b).await);
    for m in [&ma, &mb] {
        assert!(m.contains(r#"imca_storage_ops_total{op="create",result="ok"} 1"#), "{m}");
        assert!(m.contains("imca_storage_open_fds"), "{m}");
    }
    assert!(ma.contains(r#"imca_storage_cache_ops_total{op="populate",result="queued"}"#), "{ma}");
    assert!(!mb.contains("imca_storage_cache_ops_total"), "b runs no cache, yet shows a's SMCache: {mb}");
    assert!(prometheus::gather().is_empty(), "nothing registers in the process-wide registry");
    a.shutdown().await;
    b.shutdown().await;
}
