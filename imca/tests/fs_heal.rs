//! A storage server killed (SIGKILL) in the middle of a stream of creates,
//! mkdirs, renames, unlinks, rmdirs and chmods: the operations in flight
//! and those made while it is down fail; after its restart and a heal walk
//! (`imca heal MOUNT`) every server's export holds the
//! same names, kinds, ids and modes, and every acknowledged operation shows
//! (created names with their content, removed names gone).
//!
//! Without the walk: a removal or rename a follower missed (it was down) is
//! recorded by the gateway and healed in the background once the follower
//! is back; a write some of whose pieces failed is counted.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIRS: usize = 4;

/// What the users were told: present with this content, a directory, or removed.
#[derive(Clone, Debug, PartialEq)]
enum Entry {
    File(Vec<u8>),
    Dir,
    Gone,
}

/// Content spanning several 4 KiB stripe units: every server holds some.
fn content(k: usize) -> Vec<u8> {
    (0..10_000).map(|i| ((i * 31 + k * 7) % 251) as u8).collect()
}

struct Stream {
    model: BTreeMap<String, Entry>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    /// chmods that failed (some server missed them)
    chmods_failed: usize,
}

impl Stream {
    fn known(&self, want: impl Fn(&str, &Entry) -> bool) -> Vec<String> {
        self.model.iter().filter(|(p, e)| want(p, e)).map(|(p, _)| p.clone()).collect()
    }

    /// An operation whose outcome nobody was told: no promise about its paths.
    fn forget(&mut self, paths: &[&str]) {
        for p in paths {
            let under = format!("{p}/");
            self.model.retain(|k, _| k != p && !k.starts_with(&under));
        }
    }

    fn settle(&mut self, r: std::io::Result<()>, paths: &[&str], on_ok: impl FnOnce(&mut Self)) {
        match r {
            Ok(()) => {
                on_ok(self);
                self.ok.fetch_add(1, SeqCst);
            }
            Err(_) => {
                self.forget(paths);
                self.failed.fetch_add(1, SeqCst);
            }
        }
    }

    /// Operation number `k` of the stream, on the mount at `m`.
    fn step(&mut self, m: &Path, k: usize) {
        let d = format!("d{}", k % DIRS);
        let files = self.known(|_, e| matches!(e, Entry::File(_)));
        let dirs = self.known(|p, e| *e == Entry::Dir && p.contains("/m"));
        match k % 9 {
            0 | 1 | 6 => {
                // into a made directory now and then, so directory moves carry files
                let parent = if k % 3 == 0 && !dirs.is_empty() { dirs[k % dirs.len()].clone() } else { d };
                let p = format!("{parent}/n{k}");
                let r = fs::write(m.join(&p), content(k));
                self.settle(r, &[&p], |s| drop(s.model.insert(p.clone(), Entry::File(content(k)))));
            }
            2 => {
                let p = format!("{d}/m{k}");
                let r = fs::create_dir(m.join(&p));
                self.settle(r, &[&p], |s| drop(s.model.insert(p.clone(), Entry::Dir)));
            }
            3 if !files.is_empty() => {
                let from = files[k % files.len()].clone();
                let to = format!("d{}/r{k}", (k + 1) % DIRS);
                let r = fs::rename(m.join(&from), m.join(&to));
                self.settle(r, &[&from, &to], |s| {
                    let e = s.model.insert(from.clone(), Entry::Gone).unwrap_or(Entry::Gone);
                    s.model.insert(to.clone(), e);
                });
            }
            4 if !files.is_empty() => {
                let p = files[(k / 8) % files.len()].clone();
                let r = fs::remove_file(m.join(&p));
                self.settle(r, &[&p], |s| drop(s.model.insert(p.clone(), Entry::Gone)));
            }
            5 if !dirs.is_empty() => {
                let from = dirs[k % dirs.len()].clone();
                let to = format!("d{}/mm{k}", (k + 2) % DIRS);
                if to.starts_with(&format!("{from}/")) {
                    return;
                }
                let r = fs::rename(m.join(&from), m.join(&to));
                self.settle(r, &[&from, &to], |s| {
                    let under = format!("{from}/");
                    let moved: Vec<(String, Entry)> = s
                        .model
                        .range(under.clone()..)
                        .take_while(|(p, _)| p.starts_with(&under))
                        .map(|(p, e)| (p.clone(), e.clone()))
                        .collect();
                    for (p, e) in moved {
                        s.model.insert(p.clone(), Entry::Gone);
                        s.model.insert(format!("{to}/{}", &p[under.len()..]), e);
                    }
                    s.model.insert(from.clone(), Entry::Gone);
                    s.model.insert(to.clone(), Entry::Dir);
                });
            }
            7 if !dirs.is_empty() => {
                // only an empty one (as far as users were told)
                let empty = dirs.iter().find(|p| {
                    let under = format!("{p}/");
                    !self.model.iter().any(|(q, e)| q.starts_with(&under) && *e != Entry::Gone)
                });
                if let Some(p) = empty.cloned() {
                    let r = fs::remove_dir(m.join(&p));
                    self.settle(r, &[&p], |s| drop(s.model.insert(p.clone(), Entry::Gone)));
                }
            }
            8 => {
                // a file or a directory; a directory keeps its owner's rwx
                let (all, bits) = if k % 2 == 0 { (files, 0o600) } else { (dirs, 0o700) };
                if let Some(p) = all.get(k % all.len().max(1)) {
                    let r = fs::set_permissions(m.join(p), fs::Permissions::from_mode(bits | (k as u32 / 9) % 0o100));
                    self.chmods_failed += usize::from(r.is_err());
                    // (a chmod leaves the model's names and contents alone)
                    self.settle(r, &[], |_| {});
                }
            }
            _ => {}
        }
    }
}

/// The permission bits of every entry of an export.
fn export_modes(root: &Path) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".imca" {
                continue;
            }
            let md = fs::symlink_metadata(&p).unwrap();
            out.insert(rel, md.permissions().mode() & 0o7777);
            if md.is_dir() {
                todo.push(p);
            }
        }
    }
    out
}

/// Root's heal walk through the mount (`imca heal`); something left: again.
fn heal(mount: &Path) {
    for _ in 0..3 {
        let out = std::process::Command::new(common::imca_bin()).arg("heal").arg(mount).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            assert!(String::from_utf8_lossy(&out.stdout).contains("the storage servers agree"));
            return;
        }
        assert!(said.contains("still differ"), "imca heal: {said}");
    }
    panic!("the heal walk still finds disagreements after three walks");
}

/// Wait (bounded) until `n` more operations than `base` have succeeded.
fn wait_for(what: &str, counter: &AtomicUsize, base: usize, n: usize) {
    let start = Instant::now();
    while counter.load(SeqCst) < base + n {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: stream stalled");
        std::thread::yield_now();
    }
}

fn killed_mid_stream(victim: usize) {
    let mut c = ClusterSpec::new().storage(3).stripe_unit(4096).timeout(2.0).kernel_cache(false).start();
    let m = c.mount().to_path_buf();
    let mut stream = Stream { model: BTreeMap::new(), ok: Arc::default(), failed: Arc::default(), chmods_failed: 0 };
    for i in 0..DIRS {
        fs::create_dir(m.join(format!("d{i}"))).unwrap();
        stream.model.insert(format!("d{i}"), Entry::Dir);
    }
    let (ok, failed) = (stream.ok.clone(), stream.failed.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (m, stop) = (m.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(SeqCst) {
                stream.step(&m, k);
                k += 1;
            }
            stream
        })
    };
    wait_for("before the kill", &ok, 0, 150);
    c.storage[victim].kill();
    wait_for("while the server is down", &failed, 0, 20);
    c.storage[victim].restart();
    // the stream goes on; once it succeeds again, a while more
    let back = ok.load(SeqCst);
    wait_for("after the restart", &ok, back, 150);
    stop.store(true, SeqCst);
    let stream = worker.join().unwrap();

    let before: Vec<_> = (0..3).map(|i| export_tree(&c.export(i))).collect();
    let differ = |t: &[BTreeMap<String, (char, String)>]| {
        t[1..]
            .iter()
            .map(|x| {
                x.iter().filter(|(p, v)| t[0].get(*p) != Some(*v)).count() + t[0].keys().filter(|p| !x.contains_key(*p)).count()
            })
            .sum::<usize>()
    };
    eprintln!("before the walk, {} entries differ from server 0", differ(&before));
    heal(&m);
    let log = c.gateways[0].daemon.log_tail(100_000);
    let repaired = log.lines().filter(|l| l.contains("stripe heal: repaired")).count();
    eprintln!("{repaired} follower entries repaired; {} operations failed", failed.load(SeqCst));
    if victim != 0 {
        // (a follower that misses steps diverges; server 0 down stops them first)
        assert!(repaired > 0, "the follower missed steps and was repaired:\n{}", c.gateways[0].daemon.log_tail(40));
    }
    let trees: Vec<_> = (0..3).map(|i| export_tree(&c.export(i))).collect();
    assert!(trees[0].len() > DIRS, "the stream made things");
    for (i, t) in trees.iter().enumerate().skip(1) {
        assert_eq!(t, &trees[0], "server {i} agrees with server 0 (names, kinds, ids)");
    }
    // A chmod a server missed: the walk gave the followers server 0's modes.
    eprintln!("{} chmods failed", stream.chmods_failed);
    assert!(stream.chmods_failed > 0, "some chmod was missed by a server");
    let modes: Vec<_> = (0..3).map(|i| export_modes(&c.export(i))).collect();
    for (i, m) in modes.iter().enumerate().skip(1) {
        assert_eq!(m, &modes[0], "server {i} agrees with server 0 (modes)");
    }
    let mut checked = 0;
    for (p, e) in &stream.model {
        let at = m.join(p);
        match e {
            Entry::File(data) => assert_eq!(&fs::read(&at).unwrap_or_else(|e| panic!("{p}: {e}")), data, "{p}"),
            Entry::Dir => assert!(at.is_dir(), "{p} is a directory"),
            Entry::Gone => assert!(fs::symlink_metadata(&at).is_err(), "{p} was removed"),
        }
        checked += 1;
    }
    assert!(checked > 150, "{checked} acknowledged outcomes checked");
}

#[test]
fn a_follower_killed_mid_stream_is_repaired() {
    killed_mid_stream(1);
}

#[test]
fn server_zero_killed_mid_stream_leaves_the_servers_agreeing() {
    killed_mid_stream(0);
}

#[test]
fn heal_refuses_what_is_not_an_imca_mount() {
    // Root could set trusted.imca.heal on a local directory: it must not.
    let local = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::imca_bin()).arg("heal").arg(local.path()).output().unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("is not in an IMCa mount"), "{said}");
    let n = std::ffi::CString::new("trusted.imca.heal").unwrap();
    let p = std::ffi::CString::new(local.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: valid C strings, no buffer (size query).
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    assert_eq!(r, -1, "no xattr was written on the local directory");
    let out = std::process::Command::new(common::imca_bin()).arg("heal").arg(local.path().join("missing")).output().unwrap();
    assert!(!out.status.success());
}

/// A value of gateway 0's `/metrics` (`series` as printed, labels and all).
fn gateway_metric(c: &Cluster, series: &str) -> Option<f64> {
    let url = c.gateways[0].daemon.metrics_url().expect("the gateway serves /metrics");
    http_get(&url).lines().find_map(|l| {
        let (k, v) = l.rsplit_once(' ')?;
        if k == series {
            v.trim().parse().ok()
        } else {
            None
        }
    })
}

/// A log without its colours (ANSI escapes).
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut it = log.chars();
    while let Some(ch) = it.next() {
        if ch == '\u{1b}' {
            // ESC [ ... final letter
            for c in it.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// Make `p` look used (its access time is not its modification time): the
/// heal leaves a pristine new follower-only object alone for a while, as a
/// create that may be under way (`heal::maybe_in_flight`); these are not.
fn used(p: &Path) {
    let path = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let times = [
        libc::timespec { tv_sec: 1_000_000_000, tv_nsec: 0 },
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
    ];
    // SAFETY: a valid C string and two timespecs; a symlink itself is set.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    assert_eq!(r, 0, "utimensat {}: {}", p.display(), std::io::Error::last_os_error());
}

#[test]
fn removals_a_follower_missed_are_healed_without_a_hand() {
    // The kernel keeps the names it looked up for the servers' lease: the
    // removals below reach the gateway without a lookup (a file's needs
    // every server) — as when a server dies in the middle of one.
    let mut c = ClusterSpec::new()
        .storage(2)
        .stripe_unit(4096)
        .timeout(1.0)
        .storage_arg("--kernel-lease=5")
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    fs::create_dir(c.path("d")).unwrap();
    for (name, k) in [("d/f", 1), ("d/a", 2)] {
        fs::write(c.path(name), content(k)).unwrap();
        used(&c.path(name));
    }
    fs::create_dir(c.path("d/sub")).unwrap();
    used(&c.path("d/sub"));
    std::os::unix::fs::symlink("f", c.path("d/l")).unwrap();
    used(&c.path("d/l"));
    for name in ["d/f", "d/a", "d/sub", "d/l"] {
        fs::symlink_metadata(c.path(name)).unwrap();
    }
    assert_eq!(gateway_metric(&c, "imca_gateway_heals_pending"), Some(0.0), "the gateway shows its pending heals");

    // Server 0 applies each step; the follower, down, misses it: EIO.
    c.storage[1].kill();
    assert_errno(fs::remove_file(c.path("d/f")), libc::EIO);
    assert_errno(fs::remove_file(c.path("d/l")), libc::EIO);
    assert_errno(fs::remove_dir(c.path("d/sub")), libc::EIO);
    assert_errno(fs::rename(c.path("d/a"), c.path("d/b")), libc::EIO);
    let pending = gateway_metric(&c, "imca_gateway_heals_pending").unwrap_or_default();
    assert!(pending >= 5.0, "the divergences are recorded: {pending} pending");
    let status: admin::Status = c.gateways[0].admin().get("/api/v1/status").unwrap();
    assert!(status.heals.pending >= 5, "imca ctl status shows them: {:?}", status.heals);
    c.storage[1].restart();
    assert!(c.export(1).join("d/f").exists() && !c.export(0).join("d/f").exists(), "the servers differ after the restart");

    // Nobody runs `imca heal` nor looks the names up: the gateway heals them.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        // (names and modes: a symlink has no id xattr to compare)
        let (m0, m1) = (export_modes(&c.export(0)), export_modes(&c.export(1)));
        let agree = m0 == m1;
        let pending = gateway_metric(&c, "imca_gateway_heals_pending");
        if agree && pending == Some(0.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "15 s after the restart: {pending:?} heals pending; server 0 {m0:?}, server 1 {m1:?}\n{}",
            c.gateways[0].daemon.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for gone in ["d/f", "d/l", "d/sub", "d/a"] {
        assert!(fs::symlink_metadata(c.export(1).join(gone)).is_err(), "{gone} is gone from the follower");
    }
    assert!(c.export(1).join("d/b").exists(), "the rename reached the follower");
    let done = gateway_metric(&c, "imca_gateway_heals_total{result=\"done\"}").unwrap_or_default();
    assert!(done >= 5.0, "{done} heals counted done");
    // the renamed file kept the follower's stripe units
    assert_eq!(fs::read(c.path("d/b")).unwrap(), content(2));
}

#[test]
fn a_write_that_failed_part_way_is_counted_and_its_file_named() {
    use std::os::unix::fs::FileExt;
    let mut c = ClusterSpec::new().storage(2).stripe_unit(4096).timeout(1.0).kernel_cache(false).start();
    let old = content(1);
    fs::write(c.path("f"), &old).unwrap();
    let f = fs::OpenOptions::new().write(true).open(c.path("f")).unwrap();
    assert_eq!(gateway_metric(&c, "imca_gateway_writes_failed_partway_total"), Some(0.0));

    // Units of 4 KiB on two servers: [4096, 8192) is the follower's, the
    // next one server 0's. The follower's piece fails, server 0's lands.
    c.storage[1].kill();
    let new: Vec<u8> = old.iter().map(|b| b ^ 0xff).collect();
    assert_errno(f.write_at(&new[4096..], 4096), libc::EIO);
    assert_eq!(gateway_metric(&c, "imca_gateway_writes_failed_partway_total"), Some(1.0));
    let log = plain(&c.gateways[0].daemon.log_tail(200));
    assert!(log.lines().any(|l| l.contains("a write failed on some servers") && l.contains("path=f ")), "the file is named in the log:\n{log}");

    // What docs/operations.md says such a write leaves: per stripe unit,
    // old data where the piece failed, new data where it landed.
    c.storage[1].restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    let now = loop {
        match fs::read(c.path("f")) {
            Ok(d) => break d,
            Err(e) => assert!(Instant::now() < deadline, "the file still fails to read: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(now.len(), old.len());
    assert_eq!(&now[..8192], &old[..8192], "the unit whose piece failed holds the old data");
    assert_eq!(&now[8192..], &new[8192..], "the unit whose piece landed holds the new data");
}
