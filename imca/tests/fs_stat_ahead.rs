//! Stat-ahead through real mounts: a walk that stats name after name in a
//! directory this gateway knows nothing about (another gateway filled it)
//! reaches the servers for the first few names only; the gateway lists
//! the directory meanwhile and answers the rest. What it remembered is
//! called back like any other answer: changes through the other gateway
//! are seen at once.

mod coherence_support;
mod common;

use coherence_support::http;
use common::{Cluster, ClusterSpec};
use std::time::{Duration, Instant};

/// Gateway `g`'s counter `metric` with `label`.
fn gateway_metric(c: &Cluster, g: usize, metric: &str, label: &str) -> f64 {
    let u = c.gateways[g].daemon.metrics_url().expect("gateway metrics");
    http::sum(&common::http_get(&u), metric, &[label])
}

/// LOOKUPs that gateway `g` sent down its pipeline (to the bank or the servers).
fn lookups(c: &Cluster, g: usize) -> f64 {
    gateway_metric(c, g, "imca_gateway_ops_total", "op=\"lookup\"")
}

const FILES: usize = 300;

fn size(i: usize) -> usize {
    (i * 37) % 5000
}

fn fill(c: &Cluster) {
    std::fs::create_dir(c.path_at(0, "d")).unwrap();
    for i in 0..FILES {
        std::fs::write(c.path_at(0, &format!("d/f{i:03}")), vec![b'x'; size(i)]).unwrap();
    }
}

/// Stat names of `d` through gateway 1 until its stat-ahead has listed
/// the directory (the walk never waits for it, so neither does this).
fn walk_until_listed(c: &Cluster, order: &mut impl Iterator<Item = usize>) {
    let t0 = Instant::now();
    while gateway_metric(c, 1, "imca_gateway_stat_ahead_entries_total", "") < FILES as f64 {
        assert!(t0.elapsed() < Duration::from_secs(20), "no stat-ahead listing of d");
        if let Some(i) = order.next() {
            assert_eq!(std::fs::metadata(c.path_at(1, &format!("d/f{i:03}"))).unwrap().len() as usize, size(i));
        } else {
            std::thread::yield_now();
        }
    }
}

#[test]
fn a_walk_through_another_gateways_directory_is_answered_here() {
    for cache in [common::Cache::None, common::Cache::Imca(2)] {
        let c = ClusterSpec::new().gateways(2).cache(cache).storage_arg("--kernel-lease=2").start();
        fill(&c);
        // Stat every name in a scrambled order, as a walk by name would.
        let mut order = (0..FILES).map(|k| (k * 7) % FILES);
        let before = lookups(&c, 1);
        walk_until_listed(&c, &mut order);
        let early = lookups(&c, 1) - before;
        let rest: Vec<usize> = order.collect();
        let before = lookups(&c, 1);
        for &i in &rest {
            assert_eq!(std::fs::metadata(c.path_at(1, &format!("d/f{i:03}"))).unwrap().len() as usize, size(i), "{cache:?}: f{i:03}");
        }
        let late = lookups(&c, 1) - before;
        // A lease renewal on a loaded machine may cost a few.
        assert!(late <= 10.0, "{cache:?}: {late} of the last {} stats went down the pipeline ({early} before the listing)", rest.len());
        assert!(rest.len() >= FILES / 2, "{cache:?}: the listing came only after {} stats", FILES - rest.len());
        let here = gateway_metric(&c, 1, "imca_gateway_answered_here_total", "op=\"lookup\"");
        assert!(here >= rest.len() as f64 - late, "{cache:?}: answered here {here}");
    }
}

#[test]
fn what_a_stat_ahead_remembered_is_called_back() {
    let c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=2").start();
    fill(&c);
    walk_until_listed(&c, &mut (0..FILES));
    // Gateway 0 changes names gateway 1 has not stat'ed yet (remembered
    // only from the listing): each change is seen at once.
    let (a, b) = (|rel: &str| c.path_at(0, rel), |rel: &str| c.path_at(1, rel));
    std::fs::write(a("d/f290"), b"grown past the old size, surely not 3730 bytes long").unwrap();
    assert_eq!(std::fs::metadata(b("d/f290")).unwrap().len(), 51);
    std::fs::remove_file(a("d/f291")).unwrap();
    assert_eq!(std::fs::metadata(b("d/f291")).unwrap_err().raw_os_error(), Some(libc::ENOENT));
    std::fs::rename(a("d/f292"), a("d/f293")).unwrap();
    assert_eq!(std::fs::metadata(b("d/f292")).unwrap_err().raw_os_error(), Some(libc::ENOENT));
    assert_eq!(std::fs::metadata(b("d/f293")).unwrap().len() as usize, size(292));
    std::fs::write(a("d/new"), b"new").unwrap();
    assert_eq!(std::fs::read(b("d/new")).unwrap(), b"new");
    // and its own changes too
    std::fs::write(b("d/f294"), b"1234").unwrap();
    assert_eq!(std::fs::metadata(b("d/f294")).unwrap().len(), 4);
    assert_eq!(std::fs::metadata(a("d/f294")).unwrap().len(), 4);
}

/// Storage server `s`'s count of `op` requests served.
fn served(c: &Cluster, s: usize, op: &str) -> f64 {
    let u = c.storage[s].metrics_url().expect("storage metrics");
    http::sum(&common::http_get(&u), "imca_storage_ops_total", &[&format!("op=\"{op}\"")])
}

/// With a bank, the listing of a directory whose files another gateway
/// made comes from the bank: the servers are asked for its names only,
/// opening none of its files (on a cold disk, an inode read each).
#[test]
fn with_a_bank_a_walk_lists_names_only_and_takes_the_rest_from_the_bank() {
    let c = ClusterSpec::new()
        .gateways(2)
        .cache(common::Cache::Imca(2))
        .storage_arg("--kernel-lease=2")
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    // a bank answer later than the timeout is a miss (the listing would go
    // to the servers): generous, because this machine is small and shared
    c.set_volume_config(serde_json::json!({"timeout_ms": 1000}));
    std::fs::create_dir(c.path_at(0, "d")).unwrap();
    for i in 0..FILES {
        // made, not written: a create fills the bank with its entry and stat
        std::fs::File::create(c.path_at(0, &format!("d/f{i:03}"))).unwrap();
    }
    let listings = |c: &Cluster| [served(c, 0, "readdir"), served(c, 0, "names"), served(c, 1, "getattrs")];
    let before = listings(&c);
    let (t0, mut order) = (Instant::now(), 0..FILES);
    while gateway_metric(&c, 1, "imca_gateway_stat_ahead_entries_total", "") < FILES as f64 {
        assert!(t0.elapsed() < Duration::from_secs(20), "no stat-ahead listing of d");
        match order.next() {
            Some(i) => assert_eq!(std::fs::metadata(c.path_at(1, &format!("d/f{i:03}"))).unwrap().len(), 0),
            None => std::thread::yield_now(),
        }
    }
    let after = listings(&c);
    assert_eq!(after[0] - before[0], 0.0, "no listing that opens every file");
    assert!(after[1] - before[1] >= 2.0, "names asked of server 0: {}", after[1] - before[1]);
    assert_eq!(after[2] - before[2], 0.0, "no attributes asked of server 1");
    let hits = gateway_metric(&c, 1, "imca_gateway_cache_total", "op=\"listing\",result=\"hit\"");
    assert!(hits >= (FILES - 8) as f64, "{hits} entries of the listing from the bank");
    // and every answer is right, the listing's too (ls -l: READDIRPLUS)
    for i in 0..FILES {
        assert_eq!(std::fs::metadata(c.path_at(1, &format!("d/f{i:03}"))).unwrap().len(), 0);
    }
    let mut names: Vec<String> =
        std::fs::read_dir(c.path_at(1, "d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, (0..FILES).map(|i| format!("f{i:03}")).collect::<Vec<_>>());
}
