//! The admin HTTP layer in-process on 127.0.0.1:0 over an in-memory backend:
//! routing, validation (400 + JSON naming the problem, nothing applied),
//! compare-and-set, who may read and who may change. The server's limits
//! are in limits.rs; the real backend is exercised by imca/tests/ops_*.rs.

mod common;

use admin::client::{Client, ClientError};
use admin::{Auth, FlushReport, NodeStatus};
use common::Fake;
use std::sync::Arc;
use tokio::net::TcpListener;
use volume::CacheConfig;

const TOKEN: &str = "s3cret";

/// Serve `backend` on 127.0.0.1:0 with `auth`; returns the URL.
async fn start(backend: Arc<Fake>, auth: Auth) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { admin::serve(l, backend, auth, std::future::pending()).await.unwrap() });
    url
}

/// A client holding [`TOKEN`] of a gateway started with it.
async fn admin_client(backend: Arc<Fake>) -> Client {
    Client::new(&start(backend, Auth::with_token(TOKEN)).await, Some(TOKEN.into())).unwrap()
}

/// A node that answers memcached's `version` (enough for the reachability probe).
async fn fake_node() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(b"VERSION 1.6.0\r\n").await;
            });
        }
    });
    addr
}

/// A free port with nothing listening on it.
fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

fn api_err(e: ClientError) -> (u16, String, String) {
    match e {
        ClientError::Api { status, kind, message } => (status, kind, message),
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_are_validated_and_bump_the_epoch() {
    let fake = Arc::new(Fake::default());
    let c = admin_client(fake.clone()).await;
    let f2 = fake.clone();
    blocking(move || {
        let cur: CacheConfig = c.get("/api/v1/config").unwrap();
        assert_eq!(cur.epoch, 1);

        let next: CacheConfig = c.send("PUT", "/api/v1/config", &serde_json::json!({"block_size": 4096})).unwrap();
        assert_eq!((next.epoch, next.block_size), (2, 4096));

        for (body, field, words) in [
            (serde_json::json!({"block_size": 3000}), "block_size", "not a power of two"),
            (serde_json::json!({"block_size": 128}), "block_size", "below the minimum"),
            (serde_json::json!({"block_size": 262144}), "block_size", "does not divide the stripe unit"),
            (serde_json::json!({"blocksize": 4096}), "blocksize", "unknown field"),
            (serde_json::json!({"lease_ms": 1}), "lease_ms", "outside"),
            (serde_json::json!({"block_size": 1024, "timeout_ms": 0}), "timeout_ms", "outside"),
            (serde_json::json!({"volume": "other"}), "volume", "fixed"),
        ] {
            let r = c.request("PUT", "/api/v1/config", Some(body.to_string().as_bytes())).unwrap();
            assert_eq!(r.status, 400, "{body}: {}", r.text());
            let j = r.json().unwrap();
            assert_eq!(j["error"], "bad_request");
            assert_eq!(j["field"], field, "{j}");
            assert!(j["message"].as_str().unwrap().contains(words), "{body}: {j}");
        }
        let r = c.request("PUT", "/api/v1/config", Some(b"{not json")).unwrap();
        assert_eq!(r.status, 400);
        // Nothing of the refused requests was applied (the 1024 with a bad timeout included).
        let now: CacheConfig = c.get("/api/v1/config").unwrap();
        assert_eq!((now.epoch, now.block_size, now.timeout_ms), (2, 4096, next.timeout_ms));

        // A change that changes nothing keeps the epoch (no cold bank for nothing).
        let same: CacheConfig = c.send("PUT", "/api/v1/config", &serde_json::json!({"block_size": 4096})).unwrap();
        assert_eq!(same.epoch, 2);

        // PUT back what was read, with its epoch: compare-and-set.
        let stale = serde_json::json!({"epoch": 1, "placement": "crc32"});
        let (status, kind, _) = api_err(c.send::<_, CacheConfig>("PUT", "/api/v1/config", &stale).unwrap_err());
        assert_eq!((status, kind.as_str()), (409, "conflict"));
        let mut whole = serde_json::to_value(&now).unwrap();
        whole["placement"] = "modulo".into();
        let next: CacheConfig = c.send("PUT", "/api/v1/config", &whole).unwrap();
        assert_eq!(next.epoch, 3);
    })
    .await;
    assert_eq!(*f2.applied.lock().unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_node_pool_add_remove_and_unreachable() {
    let fake = Arc::new(Fake::default());
    let c = admin_client(fake.clone()).await;
    let live = fake_node().await;
    let dead = dead_addr();
    blocking(move || {
        let r = c.request("POST", "/api/v1/cache-nodes", Some(format!(r#"{{"addr":"{dead}"}}"#).as_bytes())).unwrap();
        assert_eq!(r.status, 400, "{}", r.text());
        let j = r.json().unwrap();
        assert!(j["message"].as_str().unwrap().contains("unreachable"), "{j}");
        assert_eq!(j["field"], "addr");

        let r = c.request("POST", "/api/v1/cache-nodes", Some(br#"{"addr":"nonsense"}"#)).unwrap();
        assert_eq!(r.status, 400);
        let cfg: CacheConfig = c.get("/api/v1/config").unwrap();
        assert_eq!((cfg.epoch, cfg.nodes.len()), (1, 0), "refused adds changed nothing");

        let r = c.request("POST", "/api/v1/cache-nodes", Some(format!(r#"{{"addr":"{live}"}}"#).as_bytes())).unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        let cfg: CacheConfig = serde_json::from_slice(&r.body).unwrap();
        assert_eq!((cfg.epoch, cfg.nodes.clone()), (2, vec![live.clone()]));
        let r = c.request("POST", &format!("/api/v1/cache-nodes?addr={live}"), None).unwrap();
        assert_eq!(r.status, 409, "adding twice: {}", r.text());

        let nodes: Vec<NodeStatus> = c.get("/api/v1/cache-nodes").unwrap();
        assert_eq!(nodes.len(), 1);
        let report: FlushReport = c.send("POST", "/api/v1/cache/flush", &serde_json::json!({})).unwrap();
        assert_eq!(report.nodes.len(), 1);

        let r = c.request("DELETE", &format!("/api/v1/cache-nodes?addr={dead}"), None).unwrap();
        assert_eq!(r.status, 404, "{}", r.text());
        let r = c.request("DELETE", "/api/v1/cache-nodes", Some(format!(r#"{{"addr":"{live}"}}"#).as_bytes())).unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        let cfg: CacheConfig = c.get("/api/v1/config").unwrap();
        assert_eq!((cfg.epoch, cfg.nodes.len()), (3, 0));
    })
    .await;
    assert_eq!(*fake.flushed.lock().unwrap(), 1);
}

const READS: [&str; 6] =
    ["/api/v1/status", "/api/v1/config", "/api/v1/options", "/api/v1/cache-nodes", "/metrics", "/api/v1/openapi.json"];

/// Every change the API offers, with a body it would accept.
fn changes(node: &str) -> Vec<(&'static str, String, String)> {
    vec![
        ("PUT", "/api/v1/config".into(), r#"{"block_size":4096}"#.into()),
        ("PUT", "/api/v1/config".into(), r#"{"lease_ms":600000}"#.into()),
        ("POST", "/api/v1/cache-nodes".into(), format!(r#"{{"addr":"{node}"}}"#)),
        ("DELETE", format!("/api/v1/cache-nodes?addr={node}"), String::new()),
        ("POST", "/api/v1/cache/flush".into(), "{}".into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_always_need_the_token_reads_are_open_on_loopback() {
    let fake = Arc::new(Fake::default());
    let url = start(fake.clone(), Auth::with_token(TOKEN)).await;
    let node = fake_node().await;
    let f2 = fake.clone();
    blocking(move || {
        let anon = Client::new(&url, None).unwrap();
        assert_eq!(anon.request("GET", "/healthz", None).unwrap().status, 200);
        for path in READS {
            let r = anon.request("GET", path, None).unwrap();
            assert_eq!(r.status, 200, "GET {path} on loopback needs no token: {}", r.text());
        }
        let wrong = Client::new(&url, Some("s3cre".into())).unwrap();
        for (who, c, words) in [("anonymous", &anon, "missing bearer token"), ("wrong token", &wrong, "wrong bearer token")] {
            for (method, path, body) in changes(&node) {
                let r = c.request(method, &path, Some(body.as_bytes())).unwrap();
                assert_eq!(r.status, 401, "{who}: {method} {path}: {}", r.text());
                assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"imca\""));
                let j = r.json().unwrap();
                assert_eq!(j["error"], "unauthorized");
                let m = j["message"].as_str().unwrap();
                assert!(m.contains(words) && m.contains("Authorization: Bearer"), "{who}: {m}");
                assert!(!m.contains(TOKEN), "a 401 never shows the token: {m}");
            }
        }
        let ok = Client::new(&url, Some(TOKEN.into())).unwrap();
        let cfg: CacheConfig = ok.get("/api/v1/config").unwrap();
        assert_eq!((cfg.epoch, cfg.nodes.len()), (1, 0), "the refused changes changed nothing");
        for (method, path, body) in changes(&node) {
            let r = ok.request(method, &path, Some(body.as_bytes())).unwrap();
            assert!((200..300).contains(&r.status), "{method} {path} with the token: {} {}", r.status, r.text());
        }
    })
    .await;
    assert_eq!((*f2.applied.lock().unwrap(), *f2.flushed.lock().unwrap()), (4, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_a_token_serves_a_read_only_api_and_says_how_to_fix_it() {
    let fake = Arc::new(Fake::default());
    let url = start(fake.clone(), Auth::none()).await;
    let node = fake_node().await;
    blocking(move || {
        let anon = Client::new(&url, None).unwrap();
        for path in READS {
            assert_eq!(anon.request("GET", path, None).unwrap().status, 200, "GET {path}");
        }
        let guess = Client::new(&url, Some("anything".into())).unwrap();
        for c in [&anon, &guess] {
            for (method, path, body) in changes(&node) {
                let r = c.request(method, &path, Some(body.as_bytes())).unwrap();
                assert_eq!(r.status, 401, "{method} {path}: {}", r.text());
                let m = r.json().unwrap()["message"].as_str().unwrap().to_string();
                assert!(m.contains("read-only") && m.contains("--admin-token-file") && m.contains("IMCA_ADMIN_TOKEN"), "{m}");
            }
        }
    })
    .await;
    assert_eq!((*fake.applied.lock().unwrap(), *fake.flushed.lock().unwrap()), (0, 0));
}

#[tokio::test]
async fn refuses_to_start_exposed_without_a_token() {
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let e = admin::serve(l, Arc::new(Fake::default()), Auth::none(), async {}).await.unwrap_err();
    assert!(e.to_string().contains("without a token"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposed_every_request_but_healthz_needs_the_token() {
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
    tokio::spawn(async move {
        admin::serve(l, Arc::new(Fake::default()), Auth::with_token(TOKEN), std::future::pending()).await.unwrap()
    });
    blocking(move || {
        let anon = Client::new(&url, None).unwrap();
        assert_eq!(anon.request("GET", "/healthz", None).unwrap().status, 200);
        for path in READS {
            assert_eq!(anon.request("GET", path, None).unwrap().status, 401, "GET {path} off loopback");
        }
        let ok = Client::new(&url, Some(TOKEN.into())).unwrap();
        for path in READS {
            assert_eq!(ok.request("GET", path, None).unwrap().status, 200, "GET {path} with the token");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_path_is_served_and_metrics_are_text() {
    let c = admin_client(Arc::new(Fake::default())).await;
    blocking(move || {
        let doc: serde_json::Value = c.get("/api/v1/openapi.json").unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for p in ["/healthz", "/metrics", "/api/v1/status", "/api/v1/config", "/api/v1/cache-nodes", "/api/v1/cache/flush"] {
            assert!(paths.contains_key(p), "{p} undocumented");
        }
        for (path, ops) in paths {
            for method in ops.as_object().unwrap().keys() {
                // Send an empty request: anything but "no such endpoint"/405 means routed.
                let r = c.request(&method.to_uppercase(), path, None).unwrap();
                assert!(r.status != 404 && r.status != 405, "{method} {path} -> {}: {}", r.status, r.text());
            }
        }
        let r = c.request("GET", "/api/v1/nope", None).unwrap();
        assert_eq!(r.status, 404);
        assert_eq!(r.json().unwrap()["error"], "not_found");
        prometheus::register_int_counter!("imca_admin_test_total", "test").unwrap().inc();
        let r = c.request("GET", "/metrics", None).unwrap();
        assert!(r.text().contains("imca_admin_test_total 1"), "{}", r.text());
        let opts: Vec<serde_json::Value> = c.get("/api/v1/options").unwrap();
        assert!(opts.iter().any(|o| o["name"] == "block_size"));
    })
    .await;
}
