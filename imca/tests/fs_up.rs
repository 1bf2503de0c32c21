//! `imca up`: a whole cluster from one command, cluster.json, clean stop on
//! SIGTERM, and recovery from a stale mount left by a crashed run.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `imca up` as a child; SIGTERMed and reaped on drop (a failing test leaks nothing).
struct Up(Child);

impl std::ops::Deref for Up {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Up {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            sigterm_and_wait(&mut self.0);
        }
    }
}

fn start_up(dir: &Path, mnt: &Path, extra: &[&str]) -> Up {
    // a cluster.json left by a killed run must not be mistaken for this one's
    let _ = std::fs::remove_file(dir.join("cluster.json"));
    Up(Command::new(IMCA)
        .arg("up")
        .arg("--dir")
        .arg(dir)
        .arg("--mount")
        .arg(mnt)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting imca up"))
}

fn wait_cluster_json(child: &mut Child, dir: &Path) -> Value {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read(dir.join("cluster.json")) {
            return serde_json::from_slice(&text).expect("cluster.json is JSON");
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("imca up exited early: {status}");
        }
        assert!(start.elapsed() < START_DEADLINE, "no cluster.json after {START_DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigterm_and_wait(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "imca up did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn is_mounted(mnt: &Path) -> bool {
    let canon = mnt.canonicalize().unwrap_or(mnt.to_path_buf());
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*canon.to_string_lossy()))
}

#[test]
fn up_serves_a_mount_and_stops_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mnt) = (tmp.path().join("data"), tmp.path().join("mnt"));
    let mut up = start_up(&dir, &mnt, &["--storage-servers", "3", "--no-cache"]);
    let cluster = wait_cluster_json(&mut up, &dir);

    assert_eq!(cluster["storage_servers"].as_array().unwrap().len(), 3);
    assert_eq!(cluster["cache_nodes"].as_array().unwrap().len(), 0);
    let mount = Path::new(cluster["mount"].as_str().unwrap()).to_path_buf();
    assert_eq!(mount, mnt.canonicalize().unwrap());
    assert!(cluster.get("admin").is_some());
    let metrics = cluster["metrics"].as_array().unwrap();
    assert!(metrics.len() >= 4, "storage servers and gateway serve metrics: {metrics:?}");
    for m in metrics {
        assert!(http_get(m.as_str().unwrap()).contains("imca_"), "{m} serves no imca metrics");
    }

    // The admin token: made 0600 in the data dir, named (never included) in
    // cluster.json, found there by `imca ctl --cluster`; changes need it.
    let token_file = dir.join("admin.token");
    assert_eq!(cluster["admin_token_file"].as_str().map(Path::new), Some(token_file.canonicalize().unwrap().as_path()));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_string();
    assert!(token.len() >= 32, "a real token: {} chars", token.len());
    assert!(!std::fs::read_to_string(dir.join("cluster.json")).unwrap().contains(&token), "cluster.json holds the token");
    let ctl = |args: &[&str]| {
        let out = Command::new(IMCA).arg("ctl").args(args).env_remove("IMCA_ADMIN_TOKEN").env_remove("IMCA_ADMIN").output().unwrap();
        (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    };
    let cj = dir.join("cluster.json");
    let (ok, out) = ctl(&["--cluster", cj.to_str().unwrap(), "lease", "2000"]);
    assert!(ok && out.contains("epoch"), "imca ctl --cluster: {out}");
    let admin = cluster["admin"].as_str().unwrap();
    let (ok, out) = ctl(&["--admin", admin, "lease", "3000"]);
    assert!(!ok && out.contains("401") && out.contains(&token_file.canonicalize().unwrap().display().to_string()), "{out}");
    let (ok, out) = ctl(&["--admin", admin, "config"]);
    assert!(ok && out.contains("2000"), "reads need no token on loopback: {out}");

    std::fs::write(mount.join("hello"), b"world").unwrap();
    assert_eq!(std::fs::read(mount.join("hello")).unwrap(), b"world");
    // data lands in the exports under --dir
    assert!((0..3).any(|i| dir.join(format!("storage-{i}/hello")).exists()));

    let status = sigterm_and_wait(&mut up);
    assert!(status.success(), "imca up exit status {status}");
    assert!(!is_mounted(&mnt), "still mounted after imca up stopped");
    assert!(!dir.join("cluster.json").exists(), "cluster.json outlived the cluster");

    // the data survives a restart, and so does the token
    let mut up = start_up(&dir, &mnt, &["--storage-servers", "3", "--no-cache"]);
    wait_cluster_json(&mut up, &dir);
    assert_eq!(std::fs::read(mnt.join("hello")).unwrap(), b"world");
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
    assert!(sigterm_and_wait(&mut up).success());

    // another layout over the same data is refused, not garbled
    let mut up = start_up(&dir, &mnt, &["--storage-servers", "2", "--no-cache"]);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "imca up accepted a different layout");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(!status.success());
    assert!(!is_mounted(&mnt));
}

#[test]
fn up_cleans_a_stale_mount_from_a_crashed_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, mnt) = (tmp.path().join("data"), tmp.path().join("mnt"));
    let mut up = start_up(&dir, &mnt, &["--storage-servers", "1", "--no-cache"]);
    wait_cluster_json(&mut up, &dir);
    // crash: the gateway dies without unmounting, then imca up itself
    let ready: Value = serde_json::from_slice(&std::fs::read(dir.join("run/gateway.ready")).unwrap()).unwrap();
    let pid = ready["pid"].as_u64().expect("gateway pid in its ready file") as i32;
    // SAFETY: signalling a process of this test.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = up.0.kill();
    let _ = up.0.wait();
    let start = Instant::now();
    let err = loop {
        match std::fs::metadata(&mnt) {
            Err(e) => break e,
            Ok(_) => assert!(start.elapsed() < Duration::from_secs(30), "the mount outlived its gateway"),
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        matches!(err.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)),
        "expected a stale mount, got {err}"
    );

    let mut up = start_up(&dir, &mnt, &["--storage-servers", "1", "--no-cache"]);
    wait_cluster_json(&mut up, &dir);
    std::fs::write(mnt.join("after"), b"ok").unwrap();
    assert_eq!(std::fs::read(mnt.join("after")).unwrap(), b"ok");
    assert!(sigterm_and_wait(&mut up).success());
    assert!(!is_mounted(&mnt));
}

#[test]
fn up_with_cache_nodes_imca_and_memcached() {
    for extra in [&["--cache-nodes", "2"][..], &["--cache-nodes", "1", "--memcached"][..]] {
        if extra.contains(&"--memcached") {
            require_tool("memcached", "memcached");
        }
        let tmp = tempfile::tempdir().unwrap();
        let (dir, mnt) = (tmp.path().join("data"), tmp.path().join("mnt"));
        let mut args = vec!["--storage-servers", "2"];
        args.extend_from_slice(extra);
        let mut up = start_up(&dir, &mnt, &args);
        let cluster = wait_cluster_json(&mut up, &dir);
        let nodes = cluster["cache_nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), extra[1].parse::<usize>().unwrap(), "{cluster}");
        for n in nodes {
            std::net::TcpStream::connect(n.as_str().unwrap()).expect("cache node accepts connections");
        }
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(mnt.join("cached"), &data).unwrap();
        for _ in 0..2 {
            assert_eq!(std::fs::read(mnt.join("cached")).unwrap(), data, "{extra:?}");
        }
        assert!(sigterm_and_wait(&mut up).success(), "{extra:?}");
        assert!(!is_mounted(&mnt));
    }
}
