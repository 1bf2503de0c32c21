//! Opens of a gateway that died: a file it held open and another gateway
//! removed gets its space back some leases later (the servers release the
//! dead gateway's opens), while a live gateway's open of a removed file
//! keeps the file readable for as long as it is held.

mod coherence_support;
mod common;

use coherence_support::http;
use common::{Cluster, ClusterSpec};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

fn storage_sum(c: &Cluster, metric: &str, label: &str) -> f64 {
    c.storage.iter().filter_map(|d| d.metrics_url()).map(|u| http::sum(&common::http_get(&u), metric, &[label])).sum()
}

/// Files the storage servers hold open that no longer have a name.
fn removed_but_held(c: &Cluster) -> usize {
    c.storage
        .iter()
        .filter_map(|d| d.pid())
        .flat_map(|pid| std::fs::read_dir(format!("/proc/{pid}/fd")).into_iter().flatten())
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().ends_with(" (deleted)"))
        .count()
}

/// Open `p` and wait until every server counted the open (with kernel
/// caching the gateway sends it a few milliseconds after answering).
fn open_counted(c: &Cluster, p: &std::path::Path) -> std::fs::File {
    let before = storage_sum(c, "imca_storage_ops_total", "op=\"open\"");
    let mut f = std::fs::File::open(p).unwrap();
    let mut first = [0u8; 1];
    f.read_exact(&mut first).unwrap();
    let t0 = Instant::now();
    while storage_sum(c, "imca_storage_ops_total", "op=\"open\"") < before + c.storage.len() as f64 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the open never reached the servers");
        std::thread::yield_now();
    }
    f
}

#[test]
fn a_dead_gateways_opens_end_and_a_live_ones_hold() {
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=0.5").start();
    std::fs::write(c.path_at(1, "held-by-the-dead"), &data).unwrap();
    std::fs::write(c.path_at(1, "held-by-the-living"), &data).unwrap();
    let dead = open_counted(&c, &c.path_at(0, "held-by-the-dead"));
    let living = open_counted(&c, &c.path_at(1, "held-by-the-living"));
    c.gateways[0].daemon.kill();
    std::mem::forget(dead); // its mount is gone
    std::fs::remove_file(c.path_at(1, "held-by-the-dead")).unwrap();
    std::fs::remove_file(c.path_at(1, "held-by-the-living")).unwrap();

    // The dead gateway's file goes once its opens are released (4 leases of
    // silence) and the removal holds (2 leases) are over; the living one's stays.
    let t0 = Instant::now();
    loop {
        let held = removed_but_held(&c);
        if held <= c.storage.len() && storage_sum(&c, "imca_storage_opens_reclaimed_total", "") >= c.storage.len() as f64 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{held} removed files still held open by the servers");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Well past every grace (a starved gateway may miss a poll or two, not
    // four leases of them): the file the living gateway holds is whole.
    std::thread::sleep(Duration::from_millis(500 * 8));
    assert!(removed_but_held(&c) >= 1, "the living gateway's removed file lost its data");
    let mut back = vec![0u8; data.len()];
    living.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data, "the living gateway's removed file reads back whole");
    drop(living);
    let t0 = Instant::now();
    while removed_but_held(&c) > 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "a released, removed file still held");
        std::thread::sleep(Duration::from_millis(50));
    }
}
