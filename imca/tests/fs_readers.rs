//! Which fuser threads read the kernel's requests: one process's requests
//! in a row all go to one thread (two threads taking turns cost a wake-up
//! on a cold CPU each), while concurrent processes get every thread.
//! Counted from the gateway's own threads in /proc, through a real mount.

mod common;

use common::{Cluster, ClusterSpec};
use std::collections::HashMap;

/// Context switches a thread made by waiting (one per request it read,
/// give or take its own wake-ups), by fuser thread name.
fn waits_by_thread(pid: u32) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim().to_string();
        if !name.starts_with("fuser-") || name == "fuser-bg" {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let waits = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        out.insert(name, waits);
    }
    out
}

/// Each fuser thread's share of the waits made while `work` ran.
fn shares(c: &Cluster, work: impl FnOnce()) -> Vec<f64> {
    let pid = c.gateways[0].daemon.pid().expect("gateway pid");
    let before = waits_by_thread(pid);
    work();
    let after = waits_by_thread(pid);
    let deltas: Vec<u64> = after.iter().map(|(n, w)| w - before.get(n).copied().unwrap_or(0)).collect();
    let total: u64 = deltas.iter().sum();
    assert!(total >= 500, "only {total} waits by fuser threads: {deltas:?}");
    let mut s: Vec<f64> = deltas.iter().map(|&d| d as f64 / total as f64).collect();
    s.sort_by(|a, b| b.total_cmp(a));
    s
}

fn stat_all(files: &[std::path::PathBuf], rounds: usize) {
    for _ in 0..rounds {
        for f in files {
            std::fs::metadata(f).unwrap();
        }
    }
}

#[test]
fn one_process_keeps_one_fuser_thread_and_several_get_them_all() {
    // Kernel caching off: every stat reaches the gateway.
    let c = ClusterSpec::new().kernel_cache(false).gateway_arg("--fuse-threads").gateway_arg("2").start();
    let files: Vec<_> = (0..50).map(|i| c.path(&format!("f{i}"))).collect();
    for f in &files {
        std::fs::write(f, b"x").unwrap();
    }

    let one = shares(&c, || stat_all(&files, 20));
    assert_eq!(one.len(), 2, "fuser threads: {one:?}");
    assert!(one[0] >= 0.9, "one process's requests were spread over the fuser threads: {one:?}");

    let several = shares(&c, || {
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| stat_all(&files, 10));
            }
        })
    });
    assert!(several[1] >= 0.05, "concurrent requests were all read by one fuser thread: {several:?}");
}
