//! The monitoring chain end to end: `imca ctl prometheus-config` writes a
//! scrape config for a running cluster, `promtool` accepts it, Debian's
//! `prometheus` scrapes the cluster while it is under load, and every query of
//! every panel of the Grafana dashboard returns data through Prometheus' HTTP
//! API. A renamed metric or a broken query fails here, not on an operator's
//! screen.

mod common;

use admin::client::Client;
use common::{require_tool, Cache, ClusterSpec, IMCA};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Prometheus needs a few scrapes before rates exist; generous for a busy machine.
const DATA_DEADLINE: Duration = Duration::from_secs(150);
/// What `$__rate_interval` becomes (4 scrapes at the 1 s interval).
const RATE_INTERVAL: &str = "10s";

fn dashboard() -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/grafana/imca-overview.json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("dashboard JSON")).expect("dashboard is JSON")
}

/// (panel title, query) for every target of every panel.
fn panel_queries(d: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            continue;
        }
        let title = p["title"].as_str().expect("panel title").to_string();
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("panel {title} has no targets"));
        assert!(!targets.is_empty(), "panel {title} has no queries");
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or_else(|| panic!("panel {title}: target without expr"));
            out.push((title.clone(), expr.replace("$__rate_interval", RATE_INTERVAL)));
        }
    }
    out
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start prometheus on a free port; returns it and its API client.
fn start_prometheus(config: &Path, dir: &Path) -> (Prometheus, Client) {
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    for _ in 0..10 {
        let port = testkit_procs::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log.try_clone().unwrap())
            .spawn()
            .expect("starting prometheus");
        let mut p = Prometheus(child);
        let api = Client::new(&format!("127.0.0.1:{port}"), None).unwrap();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(r) = api.request("GET", "/-/ready", None) {
                if r.status == 200 {
                    return (p, api);
                }
            }
            if p.0.try_wait().unwrap().is_some() {
                break; // lost a race for the port: try another
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = p.0.kill();
    }
    panic!("prometheus did not become ready; log:\n{}", std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default());
}

/// Does `query` return at least one finite sample?
fn has_data(api: &Client, query: &str) -> Result<(), String> {
    let r = api.request("GET", &format!("/api/v1/query?query={}", urlencode(query)), None).map_err(|e| e.to_string())?;
    let v = r.json().map_err(|e| e.to_string())?;
    if v["status"] != "success" {
        return Err(format!("query failed: {v}"));
    }
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    let finite = result.iter().any(|s| {
        s["value"][1].as_str().and_then(|x| x.parse::<f64>().ok()).is_some_and(f64::is_finite)
    });
    if finite {
        Ok(())
    } else {
        Err(format!("no finite sample ({} series)", result.len()))
    }
}

/// Writes, reads, stats and lookups through the mount until stopped, with a
/// bank flush now and then so misses (reads from the servers) keep happening
/// too; returns how many reads returned wrong data.
/// The file's contents, read through the gateway: the kernel's pages of it
/// are dropped first (it keeps them across opens), so the bank and storage
/// panels see reads.
fn read_past_the_page_cache(f: &std::path::Path) -> Vec<u8> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut file = std::fs::File::open(f).unwrap();
    // SAFETY: a valid open fd.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut out = Vec::new();
    file.read_to_end(&mut out).unwrap();
    out
}

fn load(mount: PathBuf, admin: Client, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut last_flush = Instant::now();
        let dir = mount.join("load");
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for i in 0..8 {
            std::fs::write(dir.join(format!("f{i}")), &data).unwrap();
        }
        let (mut n, mut wrong) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            let f = dir.join(format!("f{}", n % 8));
            if n % 5 == 0 {
                std::fs::write(&f, &data).unwrap();
            }
            for _ in 0..3 {
                if read_past_the_page_cache(&f) != data {
                    wrong += 1;
                }
                let _ = std::fs::metadata(&f);
                let _ = std::fs::metadata(dir.join("missing"));
            }
            let _ = std::fs::read_dir(&dir).map(|d| d.count());
            if last_flush.elapsed() > Duration::from_millis(700) {
                let r = admin.request("POST", "/api/v1/cache/flush", None).expect("flush");
                assert_eq!(r.status, 200, "flush: {}", r.text());
                last_flush = Instant::now();
            }
            n += 1;
        }
        wrong
    })
}

#[test]
fn every_dashboard_panel_has_data_in_prometheus() {
    require_tool("prometheus", "prometheus");
    require_tool("promtool", "prometheus");
    let queries = panel_queries(&dashboard());
    assert!(queries.len() >= 15, "dashboard has only {} queries", queries.len());

    let cluster = ClusterSpec::new()
        .storage(2)
        .cache(Cache::Imca(2))
        .gateways(1)
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    let admin = cluster.gateways[0].admin();
    let _: serde_json::Value = admin
        .send("PUT", "/api/v1/config", &serde_json::json!({"nodes": cluster.cache_addrs(), "timeout_ms": 200}))
        .expect("putting the cache nodes in the pool");

    // The scrape config, generated from a cluster.json like `imca up` writes.
    let dir = cluster.dir.path();
    let cluster_json = dir.join("cluster.json");
    let metrics = cluster.metrics_urls();
    assert_eq!(metrics.len(), 5, "every daemon serves /metrics: {metrics:?}");
    std::fs::write(&cluster_json, serde_json::json!({ "metrics": metrics }).to_string()).unwrap();
    let prom_yml = dir.join("prometheus.yml");
    let out = Command::new(IMCA)
        .args(["ctl", "prometheus-config", "--interval", "1s", "--cluster"])
        .arg(&cluster_json)
        .arg("--out")
        .arg(&prom_yml)
        .output()
        .unwrap();
    assert!(out.status.success(), "imca ctl prometheus-config: {}", String::from_utf8_lossy(&out.stderr));
    let check = Command::new("promtool").arg("check").arg("config").arg(&prom_yml).output().unwrap();
    assert!(
        check.status.success(),
        "promtool rejects the generated config: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    let (_prom, api) = start_prometheus(&prom_yml, dir);
    let stop = Arc::new(AtomicBool::new(false));
    let worker = load(cluster.mount().to_path_buf(), admin.clone(), stop.clone());

    // Every target is scraped successfully.
    let t0 = Instant::now();
    loop {
        let up = has_data(&api, "min(up) == 1").is_ok() && has_data(&api, "count(up) == 5").is_ok();
        if up {
            break;
        }
        assert!(t0.elapsed() < DATA_DEADLINE, "targets not all up: {:?}", has_data(&api, "up"));
        std::thread::sleep(Duration::from_millis(500));
    }

    // Every panel's query returns data.
    let mut missing: Vec<(String, String, String)> = Vec::new();
    loop {
        missing.clear();
        for (title, q) in &queries {
            if let Err(why) = has_data(&api, q) {
                missing.push((title.clone(), q.clone(), why));
            }
        }
        if missing.is_empty() || t0.elapsed() > DATA_DEADLINE {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    stop.store(true, Ordering::Relaxed);
    let wrong = worker.join().expect("load worker");
    assert!(
        missing.is_empty(),
        "{} of {} dashboard queries return no data:\n{}",
        missing.len(),
        queries.len(),
        missing.iter().map(|(t, q, w)| format!("  [{t}] {q}\n      -> {w}")).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(wrong, 0, "reads under load returned wrong data");
}
