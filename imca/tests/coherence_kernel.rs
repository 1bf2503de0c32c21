//! The coherence promise with the kernel's caches on (the default), through
//! real mounts: after a mutation is acknowledged, every read or stat that
//! starts later, on any gateway, sees it, although each gateway's kernel
//! answers repeated reads and stats itself. Gateways that die and storage
//! servers that restart do not break it.

mod coherence_support;
mod common;

use coherence_support::http;
use common::{Cache, Cluster, ClusterSpec};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

fn storage_sum(c: &Cluster, metric: &str, label: &str) -> f64 {
    c.storage.iter().filter_map(|d| d.metrics_url()).map(|u| http::sum(&common::http_get(&u), metric, &[label])).sum()
}

/// The sequence number a reader finds in `f`: its first 16 bytes.
fn header(data: &[u8]) -> Option<u64> {
    std::str::from_utf8(data.get(..16)?).ok()?.parse().ok()
}

/// Step `s` of the writer leaves `f` holding `s` in its first 16 bytes and
/// `16 + s` bytes long, by one of: an overwrite, an overwrite and a
/// truncation (growing it), or a new file renamed over it; every other step
/// also creates `u{s}` and unlinks the one before. Returns when acknowledged.
fn step(dir: &Path, s: u64, removed: &AtomicU64) {
    let f = dir.join("f");
    let content = |s: u64| {
        let mut b = format!("{s:016}").into_bytes();
        b.resize(16 + s as usize, b'.');
        b
    };
    match s % 3 {
        0 => {
            let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
            h.write_all_at(&content(s), 0).unwrap();
        }
        1 => {
            let h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
            h.write_all_at(format!("{s:016}").as_bytes(), 0).unwrap();
            h.set_len(16 + s).unwrap();
        }
        _ => {
            let tmp = dir.join("tmp");
            std::fs::write(&tmp, content(s)).unwrap();
            std::fs::rename(&tmp, &f).unwrap();
        }
    }
    if s % 2 == 0 {
        std::fs::write(dir.join(format!("u{s}")), b"x").unwrap();
        if s >= 4 {
            std::fs::remove_file(dir.join(format!("u{}", s - 2))).unwrap();
            removed.store(s - 2, SeqCst);
        }
    }
}

/// Re-read and re-stat `f` (and look for the last name removed) until told
/// to stop; every observation that started after step `floor` was
/// acknowledged must show `floor` or later. Returns how many it made.
fn reader(dir: &Path, acked: &AtomicU64, removed: &AtomicU64, stop: &AtomicBool) -> u64 {
    let f = dir.join("f");
    let mut seen = 0;
    while !stop.load(SeqCst) {
        let floor = acked.load(SeqCst);
        let gone = removed.load(SeqCst);
        let data = std::fs::read(&f).unwrap();
        let got = header(&data).unwrap_or_else(|| panic!("{}: unreadable header {:?}", dir.display(), &data[..data.len().min(20)]));
        assert!(got >= floor, "{}: read step {got} after step {floor} was acknowledged", dir.display());
        let size = std::fs::metadata(&f).unwrap().len();
        assert!(size >= 16 + floor, "{}: stat said {size} bytes after step {floor} (16 + {floor}) was acknowledged", dir.display());
        if gone > 0 {
            let r = std::fs::metadata(dir.join(format!("u{gone}")));
            assert!(r.is_err(), "{}: u{gone} still there after its unlink was acknowledged", dir.display());
        }
        seen += 1;
        // Three readers spinning on a two-core machine starve the daemons
        // until leases lapse; a reader that does a little work between
        // looks keeps this a test of coherence, not of the scheduler.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    seen
}

/// Three gateways re-read and re-stat one file while a fourth writes,
/// truncates, renames over and unlinks: nothing acknowledged is missed.
fn readers_never_miss_an_acknowledged_change(cache: Cache) {
    let c = ClusterSpec::new().gateways(4).cache(cache).start();
    std::fs::write(c.path_at(3, "f"), {
        let mut b = format!("{:016}", 0).into_bytes();
        b.resize(16, b'.');
        b
    })
    .unwrap();
    let (acked, removed, stop) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    let steps = 240;
    let seen: Vec<u64> = std::thread::scope(|s| {
        let readers: Vec<_> = (0..3)
            .map(|g| {
                let dir = c.path_at(g, "");
                let (acked, removed, stop) = (&acked, &removed, &stop);
                s.spawn(move || reader(&dir, acked, removed, stop))
            })
            .collect();
        // The readers stop when the writer does, also if it panics.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let _stop = StopOnDrop(&stop);
        let dir = c.path_at(3, "");
        for n in 1..=steps {
            step(&dir, n, &removed);
            acked.store(n, SeqCst);
        }
        drop(_stop);
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    // every reader ran all along (each observation costs little when the
    // kernel answers it, a round trip when a callback dropped it)
    for (g, n) in seen.iter().enumerate() {
        assert!(*n >= 20, "gateway {g} made only {n} observations");
    }
    for g in 0..3 {
        assert_eq!(header(&std::fs::read(c.path_at(g, "f")).unwrap()), Some(steps), "gateway {g} at the end");
    }
    assert!(storage_sum(&c, "imca_storage_callbacks_total", "outcome=\"acked\"") > 0.0, "no callback was acknowledged");
}

#[test]
fn four_gateways_with_our_cache_nodes() {
    readers_never_miss_an_acknowledged_change(Cache::Imca(2));
}

#[test]
fn four_gateways_with_memcached() {
    readers_never_miss_an_acknowledged_change(Cache::Memcached(1));
}

/// A gateway killed while it holds leases holds writers up only until its
/// lease runs out, once: after that it is no longer called back.
#[test]
fn a_killed_gateway_delays_writers_at_most_once_for_its_lease() {
    let c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=1").start();
    let (a, b) = (c.path_at(0, "f"), c.path_at(1, "f"));
    std::fs::write(&b, b"before").unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), b"before");
    let mut c = c;
    c.gateways[0].daemon.kill();
    let expired = || storage_sum(&c, "imca_storage_callbacks_total", "outcome=\"expired\"");
    // The op timeout is 10 s: a writer held up for good would fail.
    std::fs::write(&b, b"after, 1").unwrap();
    let after_first = expired();
    assert!(after_first >= 1.0, "the first write did not wait for the dead gateway's lease");
    for i in 2..5 {
        std::fs::write(&b, format!("after, {i}")).unwrap();
    }
    assert_eq!(expired(), after_first, "writes after the lease ran out still waited for the dead gateway");
    assert_eq!(std::fs::read(&b).unwrap(), b"after, 4");
}

/// A storage server killed and restarted forgets the leases it granted; its
/// grace period and the gateways' "fresh" answer keep every kernel from
/// serving what it cached under them once a change is acknowledged.
#[test]
fn a_restarted_storage_server_leaves_no_kernel_serving_stale_data() {
    let mut c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=1").start();
    let (a, b) = (c.path_at(0, "f"), c.path_at(1, "f"));
    let old = vec![b'o'; 300_000]; // striped over both servers
    std::fs::write(&b, &old).unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), old);
    assert_eq!(std::fs::read(&a).unwrap(), old, "gateway 0 caches it");
    for s in 0..c.storage.len() {
        c.storage[s].restart();
        let new = vec![b'0' + s as u8; 300_000];
        // gateway 1 reconnects on its own; its write is acknowledged only
        // after gateway 0's kernel can no longer use the old pages
        let h = std::fs::OpenOptions::new().write(true).open(&b).unwrap();
        h.write_all_at(&new, 0).unwrap();
        drop(h);
        assert_eq!(std::fs::read(&a).unwrap(), new, "gateway 0 after server {s} restarted");
        let meta = std::fs::metadata(&a).unwrap();
        assert_eq!(meta.len(), 300_000);
    }
}
