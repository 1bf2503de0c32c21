//! The admin API and `imca ctl` on a real cluster: a change made through one
//! gateway reaches every storage server and every gateway within the lease,
//! live, while reads and writes run and verify their data; refused changes
//! change nothing; a non-loopback admin address needs a token.

mod common;

use admin::client::{Client, ClientError};
use common::{Cache, ClusterSpec, IMCA};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volume::CacheConfig;

/// Generous for a loaded 2-core machine; the lease itself is 1 s.
const PROPAGATION_DEADLINE: Duration = Duration::from_secs(10);

fn status(c: &Client) -> admin::Status {
    c.get("/api/v1/status").expect("GET /api/v1/status")
}

/// Wait until every gateway uses `epoch` and every storage server holds it.
fn wait_converged(gateways: &[Client], epoch: u64) -> Duration {
    let t0 = Instant::now();
    loop {
        let sts: Vec<admin::Status> = gateways.iter().map(status).collect();
        let done = sts.iter().all(|s| s.epoch == epoch && s.storage_servers.iter().all(|v| v.epoch == Some(epoch)));
        if done {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < PROPAGATION_DEADLINE,
            "epoch {epoch} not everywhere after {PROPAGATION_DEADLINE:?}: {:?}",
            sts.iter()
                .map(|s| (s.epoch, s.storage_servers.iter().map(|v| v.epoch).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ctl(args: &[&str]) -> (bool, String) {
    let out = Command::new(IMCA).arg("ctl").args(args).env_remove("IMCA_ADMIN_TOKEN").output().expect("imca ctl");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Content of file `f` at version `v`: every byte says which file and version.
fn content(f: usize, v: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (f as u64 * 31 + v * 7 + i as u64 / 977) as u8).collect()
}

#[test]
fn live_config_changes_reach_every_gateway_and_server_without_stale_reads() {
    let mut cluster = ClusterSpec::new()
        .storage(2)
        .cache(Cache::Imca(2))
        .gateways(2)
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    let urls: Vec<String> = cluster.gateways.iter().map(|g| g.admin_url().expect("admin URL in ready file")).collect();
    let gws: Vec<Client> = urls.iter().map(|u| Client::new(u, None).unwrap()).collect();

    // Status: the pipeline, both servers healthy, both gateways on one epoch.
    let s0 = status(&gws[0]);
    assert_eq!(s0.storage_servers.len(), 2);
    assert!(s0.storage_servers.iter().all(|v| v.healthy), "{:?}", s0.storage_servers);
    assert!(s0.pipeline.len() >= 3, "{:?}", s0.pipeline);
    let mut epoch = s0.config.epoch;
    wait_converged(&gws, epoch);

    // Put the cluster's cache nodes in the pool (whatever the volume held before).
    let nodes = cluster.cache_addrs();
    // A bank timeout that a loaded 2-core machine running debug builds can meet.
    let cfg: CacheConfig =
        gws[0].send("PUT", "/api/v1/config", &serde_json::json!({ "nodes": nodes, "timeout_ms": 200 })).unwrap();
    if cfg.epoch != epoch {
        epoch = cfg.epoch;
        wait_converged(&gws, epoch);
    }

    // Readers and writers verify data through both gateways the whole time.
    const FILES: usize = 4;
    const LEN: usize = 300_000;
    for f in 0..FILES {
        std::fs::write(cluster.path(&format!("f{f}")), content(f, 0, LEN)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let versions: Arc<Vec<AtomicU64>> = Arc::new((0..FILES).map(|_| AtomicU64::new(0)).collect());
    let checks = Arc::new(AtomicU64::new(0));
    let mounts: Vec<_> = cluster.gateways.iter().map(|g| g.mount.clone()).collect();
    let mut workers = Vec::new();
    for f in 0..FILES {
        let (stop, versions, checks, mounts) = (stop.clone(), versions.clone(), checks.clone(), mounts.clone());
        workers.push(std::thread::spawn(move || {
            let mut v = 0u64;
            let mut round = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Write through one gateway (acknowledged), read through both.
                v += 1;
                let w = &mounts[round % 2];
                std::fs::write(w.join(format!("f{f}")), content(f, v, LEN)).unwrap();
                versions[f].store(v, Ordering::Relaxed);
                for (g, m) in mounts.iter().enumerate() {
                    for _ in 0..2 {
                        let got = std::fs::read(m.join(format!("f{f}"))).unwrap();
                        assert!(
                            got == content(f, v, LEN),
                            "gateway {g} returned stale or mixed data for f{f} v{v} (len {})",
                            got.len()
                        );
                        let meta = std::fs::metadata(m.join(format!("f{f}"))).unwrap();
                        assert_eq!(meta.len(), LEN as u64);
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                }
                round += 1;
            }
        }));
    }

    // Changes through gateway 0, then gateway 1, while the workers run.
    let changes = [
        serde_json::json!({"block_size": 4096}),
        serde_json::json!({"block_size": 1024, "placement": "crc32"}),
        serde_json::json!({"block_size": 65536, "placement": "modulo"}),
        serde_json::json!({"placement": "consistent", "block_size": 16384}),
    ];
    let mut slowest = Duration::ZERO;
    for (i, change) in changes.iter().enumerate() {
        let via = &gws[i % 2];
        let before = checks.load(Ordering::Relaxed);
        let cfg: CacheConfig = via.send("PUT", "/api/v1/config", change).unwrap();
        assert_eq!(cfg.epoch, epoch + 1, "{change}");
        epoch = cfg.epoch;
        slowest = slowest.max(wait_converged(&gws, epoch));
        // Let the workload run a little under each layout.
        let t = Instant::now();
        while checks.load(Ordering::Relaxed) < before + 8 && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    println!("slowest propagation to every gateway and server: {slowest:?}");

    // Refused changes: 400 with the reason, nothing applied anywhere.
    for (bad, words) in [
        (serde_json::json!({"block_size": 3000}), "not a power of two"),
        (serde_json::json!({"block_size": 128}), "below the minimum"),
        (serde_json::json!({"block_size": 4194304}), "item limit"),
        (serde_json::json!({"block_size": 262144}), "stripe unit"),
        (serde_json::json!({"bogus": 1}), "unknown field"),
    ] {
        match gws[1].send::<_, CacheConfig>("PUT", "/api/v1/config", &bad) {
            Err(ClientError::Api { status: 400, message, .. }) => assert!(message.contains(words), "{bad}: {message}"),
            other => panic!("{bad}: expected 400, got {other:?}"),
        }
    }
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    match gws[0].send::<_, CacheConfig>("POST", "/api/v1/cache-nodes", &serde_json::json!({ "addr": dead })) {
        Err(ClientError::Api { status: 400, message, .. }) => assert!(message.contains("unreachable"), "{message}"),
        other => panic!("unreachable node: expected 400, got {other:?}"),
    }
    for s in gws.iter().map(status) {
        assert_eq!(s.config.epoch, epoch, "a refused change moved the epoch");
        assert!(s.storage_servers.iter().all(|v| v.epoch == Some(epoch)));
    }

    // The pool: remove a node live, add it back (through the other gateway).
    let node = nodes[1].clone();
    let cfg: CacheConfig =
        gws[0].send("DELETE", "/api/v1/cache-nodes", &serde_json::json!({ "addr": node })).unwrap();
    assert!(!cfg.nodes.contains(&node));
    epoch = cfg.epoch;
    wait_converged(&gws, epoch);
    let cfg: CacheConfig = gws[1].send("POST", "/api/v1/cache-nodes", &serde_json::json!({ "addr": node })).unwrap();
    assert!(cfg.nodes.contains(&node));
    epoch = cfg.epoch;
    wait_converged(&gws, epoch);

    // `imca ctl` for humans, on the same cluster.
    let (ok, out) = ctl(&["--admin", &urls[1], "status"]);
    assert!(ok, "{out}");
    assert!(out.contains("STORAGE SERVER") && out.contains("CACHE NODE") && out.contains(&format!("epoch {epoch}")), "{out}");
    let (ok, out) = ctl(&["--admin", &urls[1], "block-size", "8k"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("epoch {}", epoch + 1)), "{out}");
    epoch += 1;
    wait_converged(&gws, epoch);
    let (ok, out) = ctl(&["--admin", &urls[0], "block-size", "3000"]);
    assert!(!ok && out.contains("not a power of two"), "{out}");
    let (ok, out) = ctl(&["--admin", &urls[0], "cache-nodes"]);
    assert!(ok && out.contains(&nodes[0]), "{out}");
    let (ok, out) = ctl(&["--admin", &urls[0], "flush"]);
    assert!(ok && out.contains("flushed"), "{out}");
    let (ok, out) = ctl(&["--admin", &urls[0], "options"]);
    assert!(ok && out.contains("block_size") && out.contains("lease_ms"), "{out}");

    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a worker saw wrong data (see its panic above)");
    }
    assert!(checks.load(Ordering::Relaxed) > 0);
    // The cache was really in the path: both gateways answered from the bank.
    for (g, s) in gws.iter().map(status).enumerate() {
        println!("gateway {g}: {:?}", s.hit_ratio);
        let read = s.hit_ratio.iter().find(|o| o.op == "read").expect("read hit ratio");
        assert!(read.hits > 0, "gateway {g} never read from the bank: {:?}", s.hit_ratio);
        assert!(s.cache_nodes.iter().all(|n| n.healthy && n.items.is_some()), "{:?}", s.cache_nodes);
    }
    let _ = &mut cluster;
}

#[test]
fn exposed_admin_api_needs_a_token() {
    let mut cluster = ClusterSpec::new().storage(1).gateways(0).start();
    let servers = cluster.storage_addrs().join(",");
    let mount = cluster.dir.path().join("mnt-exposed");
    std::fs::create_dir_all(&mount).unwrap();

    // No token: the gateway refuses to start, saying why.
    let out = Command::new(IMCA)
        .args(["mount", "--storage-servers", &servers, "--admin", "0.0.0.0:0"])
        .arg(&mount)
        .env_remove("IMCA_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
    common::force_unmount(&mount);

    // With a token file: 401 without it or with a wrong one, 200 with it.
    let token_file = cluster.dir.path().join("admin.token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let g = cluster.add_gateway(&["--admin", "0.0.0.0:0", "--admin-token-file", token_file.to_str().unwrap()]);
    let url = cluster.gateways[g].admin_url().unwrap().replace("0.0.0.0", "127.0.0.1");
    let anon = Client::new(&url, None).unwrap();
    assert_eq!(anon.request("GET", "/api/v1/status", None).unwrap().status, 401);
    assert_eq!(anon.request("GET", "/healthz", None).unwrap().status, 200);
    let wrong = Client::new(&url, Some("guess".into())).unwrap();
    assert_eq!(wrong.request("PUT", "/api/v1/config", Some(br#"{"block_size":4096}"#)).unwrap().status, 401);
    let ok = Client::new(&url, Some("s3cret-token".into())).unwrap();
    let s: admin::Status = ok.get("/api/v1/status").unwrap();
    assert_ne!(s.config.block_size, 4096, "the unauthorized PUT changed nothing");
    let (good, out) = ctl(&["--admin", &url, "--token-file", token_file.to_str().unwrap(), "config"]);
    assert!(good && out.contains("block_size"), "{out}");
    let (good, out) = ctl(&["--admin", &url, "config"]);
    assert!(!good && out.contains("401"), "{out}");
}

#[test]
fn a_server_down_during_a_change_is_brought_up_to_date_when_back() {
    let mut cluster = ClusterSpec::new()
        .storage(3)
        .cache(Cache::Imca(1))
        .gateways(1)
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .timeout(2.0)
        .start();
    let gw = Client::new(&cluster.gateways[0].admin_url().unwrap(), None).unwrap();
    let before: CacheConfig = gw.get("/api/v1/config").unwrap();

    // Server 2 is down: the change still commits (server 0 is the authority).
    cluster.storage[2].kill();
    let cfg: CacheConfig = gw.send("PUT", "/api/v1/config", &serde_json::json!({"block_size": 8192})).unwrap();
    assert_eq!(cfg.epoch, before.epoch + 1);
    let s = status(&gw);
    assert!(!s.storage_servers[2].healthy, "{:?}", s.storage_servers);

    // A second change while it is still down: it will be two epochs behind.
    let cfg: CacheConfig = gw.send("PUT", "/api/v1/config", &serde_json::json!({"block_size": 16384})).unwrap();
    assert_eq!(cfg.epoch, before.epoch + 2);

    // Back with its old config on disk; the gateway's lease repairs it.
    cluster.storage[2].restart();
    let t0 = Instant::now();
    loop {
        let s = status(&gw);
        if s.storage_servers[2].epoch == Some(cfg.epoch) {
            break;
        }
        assert!(t0.elapsed() < PROPAGATION_DEADLINE * 2, "server 2 not repaired: {:?}", s.storage_servers);
        std::thread::sleep(Duration::from_millis(50));
    }
    let on_disk: CacheConfig =
        serde_json::from_slice(&std::fs::read(cluster.export(2).join(".imca/volume.json")).unwrap()).unwrap();
    assert_eq!((on_disk.epoch, on_disk.block_size), (cfg.epoch, 16384));
    // And the volume works through it again.
    std::fs::write(cluster.path("after"), vec![7u8; 1 << 20]).unwrap();
    assert_eq!(std::fs::read(cluster.path("after")).unwrap(), vec![7u8; 1 << 20]);
}
