//! The admin HTTP layer in-process on 127.0.0.1:0 over an in-memory backend:
//! routing, validation (400 + JSON naming the problem, nothing applied),
//! compare-and-set, auth. The real backend is exercised by imca/tests/ops_*.rs.

use admin::client::{Client, ClientError};
use admin::{AdminBackend, AdminError, FlushReport, Limits, NodeFlush, NodeStatus, Status};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use volume::CacheConfig;

#[derive(Default)]
struct Fake {
    cfg: Mutex<CacheConfig>,
    applied: Mutex<u32>,
    flushed: Mutex<u32>,
}

#[async_trait]
impl AdminBackend for Fake {
    async fn status(&self) -> Result<Status, AdminError> {
        let c = self.cfg.lock().unwrap().clone();
        Ok(Status {
            volume: c.volume.clone(),
            epoch: c.epoch,
            cache_nodes: c.nodes.iter().map(|n| NodeStatus { addr: n.clone(), healthy: true, ..Default::default() }).collect(),
            config: c,
            pipeline: vec!["io-stats".into(), "cmcache".into(), "stripe".into()],
            ..Default::default()
        })
    }
    async fn config(&self) -> Result<CacheConfig, AdminError> {
        Ok(self.cfg.lock().unwrap().clone())
    }
    async fn limits(&self, _nodes: &[String]) -> Limits {
        Limits::default()
    }
    async fn apply_config(&self, proposed: CacheConfig) -> Result<CacheConfig, AdminError> {
        let mut g = self.cfg.lock().unwrap();
        if g.epoch != proposed.epoch {
            return Err(AdminError::Conflict("moved".into()));
        }
        *g = CacheConfig { epoch: proposed.epoch + 1, ..proposed };
        *self.applied.lock().unwrap() += 1;
        Ok(g.clone())
    }
    async fn flush(&self) -> Result<FlushReport, AdminError> {
        *self.flushed.lock().unwrap() += 1;
        let c = self.cfg.lock().unwrap().clone();
        Ok(FlushReport { epoch: c.epoch, nodes: c.nodes.iter().map(|n| NodeFlush { addr: n.clone(), ok: true, error: None }).collect() })
    }
}

/// Serve `backend` on 127.0.0.1:0; returns the URL.
async fn start(backend: Arc<Fake>, token: Option<&str>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let token = token.map(str::to_string);
    tokio::spawn(async move { admin::serve(l, backend, token, std::future::pending()).await.unwrap() });
    url
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
    let c = Client::new(&start(fake.clone(), None).await, None).unwrap();
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
    let c = Client::new(&start(fake.clone(), None).await, None).unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_when_set() {
    let url = start(Arc::new(Fake::default()), Some("s3cret")).await;
    blocking(move || {
        let anon = Client::new(&url, None).unwrap();
        assert_eq!(anon.request("GET", "/healthz", None).unwrap().status, 200);
        for path in ["/api/v1/status", "/api/v1/config", "/metrics", "/api/v1/openapi.json"] {
            let r = anon.request("GET", path, None).unwrap();
            assert_eq!(r.status, 401, "{path}");
            assert_eq!(r.json().unwrap()["error"], "unauthorized");
        }
        let wrong = Client::new(&url, Some("guess".into())).unwrap();
        assert_eq!(wrong.request("GET", "/api/v1/status", None).unwrap().status, 401);
        let r = wrong.request("PUT", "/api/v1/config", Some(br#"{"block_size":4096}"#)).unwrap();
        assert_eq!(r.status, 401);
        let ok = Client::new(&url, Some("s3cret".into())).unwrap();
        let cfg: CacheConfig = ok.get("/api/v1/config").unwrap();
        assert_eq!(cfg.epoch, 1, "the unauthorized PUT changed nothing");
        let s: Status = ok.get("/api/v1/status").unwrap();
        assert_eq!(s.pipeline.len(), 3);
    })
    .await;
}

#[tokio::test]
async fn refuses_to_start_exposed_without_a_token() {
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let e = admin::serve(l, Arc::new(Fake::default()), None, async {}).await.unwrap_err();
    assert!(e.to_string().contains("without a token"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_path_is_served_and_metrics_are_text() {
    let c = Client::new(&start(Arc::new(Fake::default()), None).await, None).unwrap();
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
