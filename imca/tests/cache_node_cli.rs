//! `imca cache-node` as operators run it: memcached's flags, the ready file,
//! a real memcached client, /metrics, and a clean exit on SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn cache_node_binary_serves_memcached_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-p", "0", "-l", "127.0.0.1", "-m", "8", "-c", "64", "-t", "2", "-I", "2m", "-U", "0", "-v"])
        .args(["--metrics", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start imca cache-node");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        assert!(child.try_wait().unwrap().is_none(), "imca cache-node exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    let info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let addr = info["addr"].as_str().unwrap().to_string();
    let metrics = info["metrics"].as_str().unwrap().trim_start_matches("http://").trim_end_matches("/metrics").to_string();

    let c = memcache::Client::connect(format!("memcache://{addr}")).unwrap();
    let value = vec![7u8; 1_500_000]; // over 1 MiB: allowed by -I 2m
    c.set("big", &value[..], 0).unwrap();
    assert_eq!(c.get::<Vec<u8>>("big").unwrap().unwrap(), value);
    let settings = c.stats().unwrap();
    assert!(!settings.is_empty());

    let mut s = TcpStream::connect(&metrics).unwrap();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains("imca_cache_node_ops_total{op=\"get\",result=\"hit\"} 1"), "{body}");

    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "exit status {status}");
    assert!(TcpStream::connect(&addr).is_err());
}

/// Like Debian's memcached.conf: without `-l` a node is reachable from this
/// host only (memcached's protocol has no authentication), and `--help` says so.
#[test]
fn cache_node_listens_on_loopback_by_default() {
    let help = Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1]") && help.contains("loopback"), "{help}");

    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-p", "0", "-m", "8", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start imca cache-node");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        assert!(child.try_wait().unwrap().is_none(), "imca cache-node exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    let info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let addr = info["addr"].as_str().unwrap().to_string();
    let _ = child.kill();
    let _ = child.wait();
    assert!(addr.starts_with("127.0.0.1:"), "bound to {addr}");
}
