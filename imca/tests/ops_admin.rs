//! The admin API and `imca ctl` on a real cluster: a change made through one
//! gateway reaches every storage server and every gateway within the lease,
//! live, while reads and writes run and verify their data; refused changes
//! change nothing; changes need the admin token, on loopback too (`imca ctl`
//! finds it through a cluster file); a non-loopback admin address needs a
//! token for everything; idle, slow and oversized requests are bounded.

mod common;

use admin::client::{Client, ClientError};
use common::{Cache, ClusterSpec, IMCA};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
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
    ctl_env(args, None)
}

/// `imca ctl` with `$IMCA_ADMIN_TOKEN` set to `token` (or unset).
fn ctl_env(args: &[&str], token: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new(IMCA);
    cmd.arg("ctl").args(args).env_remove("IMCA_ADMIN_TOKEN").env_remove("IMCA_ADMIN");
    if let Some(t) = token {
        cmd.env("IMCA_ADMIN_TOKEN", t);
    }
    let out = cmd.output().expect("imca ctl");
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
    let gws: Vec<Client> = cluster.gateways.iter().map(|g| g.admin()).collect();

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

    // `imca ctl` for humans, on the same cluster, through a cluster file
    // like `imca up`'s: it names the token's file, never the token.
    let token_file = cluster.admin_token_file();
    let tf = token_file.to_str().unwrap();
    let cluster_json = cluster.dir.path().join("cluster.json");
    std::fs::write(&cluster_json, serde_json::json!({ "admin": urls[1], "admin_token_file": tf }).to_string()).unwrap();
    let cj = cluster_json.to_str().unwrap();
    let (ok, out) = ctl(&["--cluster", cj, "status"]);
    assert!(ok, "{out}");
    assert!(out.contains("STORAGE SERVER") && out.contains("CACHE NODE") && out.contains(&format!("epoch {epoch}")), "{out}");
    let (ok, out) = ctl(&["--cluster", cj, "block-size", "8k"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("epoch {}", epoch + 1)), "{out}");
    epoch += 1;
    wait_converged(&gws, epoch);
    let (ok, out) = ctl(&["--admin", &urls[0], "--token-file", tf, "block-size", "3000"]);
    assert!(!ok && out.contains("not a power of two"), "{out}");
    // Reads need no token on loopback; a change without one is refused,
    // saying how to give it.
    let (ok, out) = ctl(&["--admin", &urls[0], "cache-nodes"]);
    assert!(ok && out.contains(&nodes[0]), "{out}");
    let (ok, out) = ctl(&["--admin", &urls[0], "flush"]);
    assert!(!ok && out.contains("401") && out.contains("--token-file"), "{out}");
    let token = cluster.gateways[0].admin_token().unwrap();
    let (ok, out) = ctl_env(&["--admin", &urls[0], "timeout", "200"], Some("not-the-token"));
    assert!(!ok && out.contains("wrong bearer token"), "{out}");
    let (ok, out) = ctl_env(&["--admin", &urls[0], "timeout", "200"], Some(&token));
    assert!(ok, "$IMCA_ADMIN_TOKEN: {out}");
    let (ok, out) = ctl(&["--admin", &urls[0], "--token-file", tf, "flush"]);
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
        .arg("--secret-file")
        .arg(cluster.secret_file())
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
    let gw = cluster.gateways[0].admin();
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

/// Everything the server sends on `s` until it closes the connection (EOF
/// or reset) or `within` passes; whether it closed.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let end = Instant::now() + within;
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (got, false);
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return (got, false),
            Err(_) => return (got, true),
        }
    }
}

/// Connections the server holds open: nothing sent on them, not closed.
fn still_open(conns: &[TcpStream]) -> usize {
    let mut b = [0u8; 1];
    conns
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            let open = matches!(s.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
            s.set_nonblocking(false).unwrap();
            open
        })
        .count()
}

/// Resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

/// The findings, replayed as an ordinary local user would: changes without
/// the token (flush the bank, a 600 s lease, remove a node, add one's own)
/// are refused and change nothing, even with the cluster file in hand;
/// thousands of idle connections are capped and closed, and the gateway's
/// memory stays bounded and comes back; a head trickled forever is cut; an
/// oversized body is refused. The gateway serves throughout.
#[test]
fn a_local_user_can_neither_change_nor_exhaust_the_admin_api() {
    const FLOOD: usize = 3_000;
    let cluster = ClusterSpec::new()
        .storage(1)
        .cache(Cache::Imca(1))
        // open, so the test can put a canary in the bank with a plain client
        .open_cache()
        .gateways(1)
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    let gw = &cluster.gateways[0];
    let url = gw.admin_url().unwrap();
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let admin = gw.admin();
    let node = cluster.cache_addrs()[0].clone();
    let _: CacheConfig = admin.send("PUT", "/api/v1/config", &serde_json::json!({ "nodes": [node] })).unwrap();
    let before: CacheConfig = admin.get("/api/v1/config").unwrap();
    let bank = memcache::Client::connect(format!("memcache://{node}")).unwrap();
    bank.set("canary", "still here", 0).unwrap();

    // Changes without the token, or with a guess: 401 saying where the token is.
    let token_file = gw.admin_token_file().unwrap();
    let attacks = [
        ("POST", "/api/v1/cache/flush".to_string(), "{}".to_string()),
        ("PUT", "/api/v1/config".into(), r#"{"lease_ms": 600000}"#.into()),
        ("DELETE", format!("/api/v1/cache-nodes?addr={node}"), String::new()),
        ("POST", "/api/v1/cache-nodes".into(), r#"{"addr": "127.0.0.1:1"}"#.into()),
    ];
    for token in [None, Some("guess".to_string())] {
        let c = Client::new(&url, token.clone()).unwrap();
        for (method, path, body) in &attacks {
            let r = c.request(method, path, Some(body.as_bytes())).unwrap();
            assert_eq!(r.status, 401, "{method} {path} with {token:?}: {}", r.text());
            assert!(r.text().contains(&token_file.display().to_string()), "the 401 says where the token is: {}", r.text());
        }
    }
    // As another user (uid 1001) with the cluster file: the token file is
    // the owner's (0600), so status works and a flush does not.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
        let open = cluster.dir.path().join("shared");
        std::fs::create_dir_all(&open).unwrap();
        for d in [cluster.dir.path(), open.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let cj = open.join("cluster.json");
        std::fs::write(&cj, serde_json::json!({ "admin": url, "admin_token_file": token_file }).to_string()).unwrap();
        std::fs::set_permissions(&cj, std::fs::Permissions::from_mode(0o644)).unwrap();
        let as_user = |cmd: &str| {
            let out = Command::new(IMCA)
                .args(["ctl", "--cluster"])
                .arg(&cj)
                .arg(cmd)
                .env_remove("IMCA_ADMIN_TOKEN")
                .uid(1001)
                .gid(1001)
                .output()
                .unwrap();
            (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        };
        let (ok, out) = as_user("status");
        assert!(ok, "uid 1001 reads the status: {out}");
        let (ok, out) = as_user("flush");
        assert!(!ok && out.contains("401") && out.contains("cannot read admin token file"), "uid 1001 flushed: {out}");
    }
    let after: CacheConfig = admin.get("/api/v1/config").unwrap();
    assert_eq!(after, before, "a refused change changed the config");
    assert_eq!(bank.get::<String>("canary").unwrap().as_deref(), Some("still here"), "the bank was flushed");

    // A head trickled one header at a time, from before the flood.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n").unwrap();
    let slowloris = std::thread::spawn(move || {
        let t0 = Instant::now();
        for i in 0.. {
            if slow.write_all(format!("X-Slow-{i}: y\r\n").as_bytes()).is_err() || read_until_closed(&mut slow, Duration::from_millis(500)).1 {
                return Some(t0.elapsed());
            }
            if t0.elapsed() > admin::limits::HEADER_TIMEOUT * 3 {
                return None;
            }
        }
        None
    });

    // Thousands of idle connections.
    let pid = gw.daemon.pid().unwrap();
    let base = rss_mib(pid);
    let t0 = Instant::now();
    let mut idle: Vec<TcpStream> = (0..FLOOD).map(|_| TcpStream::connect(addr).expect("connect")).collect();
    let flooded = t0.elapsed();
    // Answered after the flood: the gateway has accepted all of it (FIFO).
    let r = Client::new(&url, None).unwrap().request("GET", "/healthz", None).unwrap();
    // Shed connections close as their tasks run: poll for the cap to show.
    let mut held = still_open(&idle);
    let t = Instant::now();
    while held > admin::limits::MAX_CONNECTIONS && t.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        held = still_open(&idle);
    }
    let during = rss_mib(pid);
    println!("{FLOOD} idle connections in {flooded:?}; then a request got {}; held open: {held}", r.status);
    assert!(held <= admin::limits::MAX_CONNECTIONS, "{held} held, cap {}", admin::limits::MAX_CONNECTIONS);
    let mut refused = 0;
    for s in &mut idle {
        let (reply, closed) = read_until_closed(s, admin::limits::HEADER_TIMEOUT + Duration::from_secs(15));
        assert!(closed, "an idle connection still open {:?} after the flood began", t0.elapsed());
        refused += usize::from(reply.starts_with(b"HTTP/1.1 503"));
    }
    let all_closed = t0.elapsed();
    drop(idle);
    let cut = slowloris.join().unwrap().expect("the slowloris head was never cut");
    // cut by the header timeout, or sooner: shed for the flood's newcomers
    assert!(cut <= admin::limits::HEADER_TIMEOUT + Duration::from_secs(1), "slowloris cut after {cut:?}");
    // Memory given back: what the connections took is freed once they are closed.
    let t = Instant::now();
    let mut after_mib = rss_mib(pid);
    while after_mib > base + 8.0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        after_mib = rss_mib(pid);
    }
    println!(
        "{refused} refused with 503 at once, the rest shed or closed by the header timeout: all closed after {all_closed:?}; \
         slowloris cut after {cut:?}; gateway RSS {base:.1} MiB before, {during:.1} during, {after_mib:.1} after"
    );
    assert!(during - base < 32.0, "the flood took {:.1} MiB", during - base);
    assert!(after_mib - base < 8.0, "{:.1} MiB not given back", after_mib - base);

    // An oversized body, even with the token: 413. The API still works.
    let big = vec![b' '; admin::limits::MAX_BODY_BYTES + 1];
    assert_eq!(admin.request("PUT", "/api/v1/config", Some(&big)).unwrap().status, 413);
    let cfg: CacheConfig = admin.send("PUT", "/api/v1/config", &serde_json::json!({ "lease_ms": 2000 })).unwrap();
    assert_eq!((cfg.epoch, cfg.lease_ms), (before.epoch + 1, 2000));
}
