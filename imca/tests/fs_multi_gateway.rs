//! Two gateways on the same storage servers: a change made through one is
//! visible through the other at once (kernel caches are called back), and
//! racing creates of the same names leave every file whole.

mod coherence_support;
mod common;

use coherence_support::http;
use common::*;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};

#[test]
fn changes_through_one_gateway_are_visible_through_the_other() {
    let c = ClusterSpec::new().gateways(2).start();
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));

    fs::write(a("f"), b"one").unwrap();
    assert_eq!(fs::read(b("f")).unwrap(), b"one");
    fs::write(b("f"), b"two, longer").unwrap();
    assert_eq!(fs::read(a("f")).unwrap(), b"two, longer");
    assert_eq!(fs::metadata(a("f")).unwrap().len(), 11);

    // a descriptor open in A sees B's write on its next read
    let held = fs::File::open(a("f")).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(held.read_at(&mut buf, 0).unwrap(), 11);
    let w = OpenOptions::new().write(true).open(b("f")).unwrap();
    w.write_all_at(b"TWO", 0).unwrap();
    drop(w);
    let n = held.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"TWO, longer");

    // namespace changes
    fs::create_dir(a("d")).unwrap();
    fs::write(a("d/x"), b"x").unwrap();
    fs::rename(b("d"), b("e")).unwrap();
    assert_errno(fs::metadata(a("d/x")), libc::ENOENT);
    assert_eq!(fs::read(a("e/x")).unwrap(), b"x");
    fs::remove_file(a("e/x")).unwrap();
    assert_errno(fs::metadata(b("e/x")), libc::ENOENT);
    assert_eq!(fs::read_dir(b("e")).unwrap().count(), 0);
    fs::remove_dir(b("e")).unwrap();
    assert_errno(fs::read_dir(a("e")), libc::ENOENT);

    // truncate and chmod
    OpenOptions::new().write(true).open(a("f")).unwrap().set_len(2).unwrap();
    assert_eq!(fs::read(b("f")).unwrap(), b"TW");
    fs::set_permissions(b("f"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::mode(&fs::metadata(a("f")).unwrap()) & 0o777, 0o600);

    // appends from both gateways interleave without losing any
    let mut expect = b"TW".to_vec();
    for i in 0..10u8 {
        let path = if i % 2 == 0 { a("f") } else { b("f") };
        let chunk = vec![b'a' + i; 100 + i as usize];
        OpenOptions::new().append(true).open(path).unwrap().write_all(&chunk).unwrap();
        expect.extend_from_slice(&chunk);
    }
    assert_eq!(fs::read(a("f")).unwrap(), expect);
    assert_eq!(fs::read(b("f")).unwrap(), expect);

    // a file created in A and removed in B, then re-created in A with new content
    fs::write(a("g"), b"first").unwrap();
    fs::remove_file(b("g")).unwrap();
    fs::write(a("g"), b"second").unwrap();
    assert_eq!(fs::read(b("g")).unwrap(), b"second");
}

/// Both gateways create the same 100 new names at once (O_CREAT without
/// O_EXCL, as `touch` and most programs do; and mkdir): every name ends up
/// one whole file or directory that both see, stat and remove, with one id
/// on every server; no create fails but with EEXIST (mkdir).
#[test]
fn the_same_names_created_at_once_through_both_gateways_are_whole() {
    let c = ClusterSpec::new().gateways(2).start();
    let names: Vec<String> = (0..100).map(|i| format!("n{i:03}")).collect();
    let run = |g: usize| {
        let (c, names) = (&c, &names);
        move || {
            let mut errors = Vec::new();
            for n in names {
                let r = OpenOptions::new().create(true).truncate(false).write(true).open(c.path_at(g, n));
                if let Err(e) = r {
                    errors.push(format!("create {n}: {e}"));
                }
                match fs::create_dir(c.path_at(g, &format!("{n}.d"))) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => errors.push(format!("mkdir {n}.d: {e}")),
                }
            }
            errors
        }
    };
    let errors: Vec<String> = std::thread::scope(|s| {
        let (a, b) = (s.spawn(run(0)), s.spawn(run(1)));
        let mut e = a.join().unwrap();
        e.extend(b.join().unwrap());
        e
    });
    if !errors.is_empty() {
        for g in &c.gateways {
            eprintln!("{}", g.daemon.log_tail(40));
        }
    }
    assert!(errors.is_empty(), "{} creates failed: {:?}", errors.len(), &errors[..errors.len().min(5)]);
    // Creates ask every server at once: the losers' parts were replaced by
    // the winners' ids, so the servers agree name for name.
    let trees: Vec<_> = (0..2).map(|i| export_tree(&c.export(i))).collect();
    assert_eq!(trees[0].len(), 200);
    assert_eq!(trees[1], trees[0], "server 1 holds server 0's names, kinds and ids");
    for n in &names {
        let (x, y) = (fs::metadata(c.path_at(0, n)).unwrap(), fs::metadata(c.path_at(1, n)).unwrap());
        assert!(x.is_file() && y.is_file(), "{n}");
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&x), std::os::unix::fs::MetadataExt::ino(&y), "{n}: one file id");
        assert!(fs::metadata(c.path_at(1, &format!("{n}.d"))).unwrap().is_dir());
    }
    for n in &names {
        fs::remove_file(c.path_at(1, n)).unwrap();
        fs::remove_dir(c.path_at(0, &format!("{n}.d"))).unwrap();
    }
    assert_eq!(fs::read_dir(c.path_at(0, "")).unwrap().count(), 0);
    assert_eq!(fs::read_dir(c.path_at(1, "")).unwrap().count(), 0);
}

/// Two gateways racing in one directory: while gateway 0 creates, renames
/// and removes names in a directory it made (where it answers "absent"
/// itself, and a removal here keeps that knowledge), every name gateway 1
/// adds there is seen by gateway 0 as soon as the create returned, and
/// every name gateway 1 removes is gone for it, with and without a bank;
/// and no change waited out the other gateway's lease (an entry callback
/// reaches a kernel only for names it holds: dropping one takes the
/// directory's lock, which that kernel's own change there holds meanwhile).
#[test]
fn names_added_and_removed_through_another_gateway_are_seen_while_this_one_removes_in_the_same_directory() {
    const ROUNDS: usize = 60;
    for cache in [common::Cache::None, common::Cache::Imca(2)] {
        let c = ClusterSpec::new().gateways(2).cache(cache.clone()).start();
        let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));
        fs::create_dir(a("d")).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let errors: Vec<String> = std::thread::scope(|s| {
            let churn = s.spawn(|| {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    fs::write(a(&format!("d/a{i}")), b"a").unwrap();
                    fs::rename(a(&format!("d/a{i}")), a(&format!("d/b{i}"))).unwrap();
                    fs::remove_file(a(&format!("d/b{i}"))).unwrap();
                    i += 1;
                }
                i
            });
            let mut errors = Vec::new();
            for j in 0..ROUNDS {
                let x = format!("d/x{j}");
                fs::write(b(&x), b"x").unwrap();
                if let Err(e) = fs::metadata(a(&x)) {
                    errors.push(format!("{x} created through gateway 1, then through gateway 0: {e}"));
                }
                fs::remove_file(b(&x)).unwrap();
                if fs::metadata(a(&x)).is_ok() {
                    errors.push(format!("{x} removed through gateway 1, still there through gateway 0"));
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let rounds = churn.join().unwrap();
            assert!(rounds > 0, "gateway 0 made no change meanwhile");
            errors
        });
        assert!(errors.is_empty(), "{cache:?}: {} of {} checks failed: {:?}", errors.len(), 2 * ROUNDS, &errors[..errors.len().min(5)]);
        assert!(callbacks(&c, "acked") > 0.0, "{cache:?}: no callback was waited for");
        assert_eq!(callbacks(&c, "expired"), 0.0, "{cache:?}: a change waited out the other gateway's lease");
        assert_eq!(fs::read_dir(a("d")).unwrap().count(), 0, "{cache:?}");
        assert_eq!(fs::read_dir(b("d")).unwrap().count(), 0, "{cache:?}");
    }
}

/// A file under several names (hard links): every name gateway 0's kernel
/// holds is called back when gateway 1 removes or replaces it, not only
/// the one the gateway found the file under last.
#[test]
fn every_name_of_a_hard_linked_file_is_called_back() {
    let c = ClusterSpec::new().gateways(2).start();
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));
    fs::create_dir(a("d")).unwrap();
    fs::write(a("d/f"), b"one").unwrap();
    fs::hard_link(a("d/f"), a("d/g")).unwrap();
    fs::hard_link(a("d/f"), a("h")).unwrap();
    // gateway 0's kernel holds all three names (the second stat is its own)
    for _ in 0..2 {
        for n in ["d/f", "d/g", "h"] {
            assert_eq!(fs::metadata(a(n)).unwrap().nlink(), 3, "{n}");
        }
    }
    fs::remove_file(b("d/g")).unwrap();
    assert_errno(fs::metadata(a("d/g")), libc::ENOENT);
    fs::write(b("x"), b"another file").unwrap();
    fs::rename(b("x"), b("h")).unwrap();
    assert_eq!(fs::read(a("h")).unwrap(), b"another file");
    assert_eq!(fs::read(a("d/f")).unwrap(), b"one");
    assert_eq!(fs::metadata(a("d/f")).unwrap().nlink(), 1);
}

/// The durability promise across gateways: what a gateway acknowledged and
/// fsynced survives its SIGKILL, and the other gateway reads it whole, with
/// every name it lists readable. (The file is still open in the killed
/// gateway, and written after its fsync: that part is not promised.)
#[test]
fn what_a_killed_gateway_fsynced_is_read_through_the_other() {
    let mut c = ClusterSpec::new().gateways(2).start();
    let (ma, mb) = (c.path_at(0, ""), c.path_at(1, ""));
    let (a, b) = (|p: &str| ma.join(p), |p: &str| mb.join(p));
    let data: Vec<u8> = (0..(1 << 20) + 4097).map(|i| (i * 7 % 251) as u8).collect();

    fs::create_dir(a("d")).unwrap();
    let mut f = OpenOptions::new().create(true).write(true).open(a("d/kept")).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    fs::File::open(a("d")).unwrap().sync_all().unwrap();
    fs::write(a("d/small"), b"small, fsynced").unwrap();
    fs::File::open(a("d/small")).unwrap().sync_all().unwrap();
    f.write_all(b"after the fsync").unwrap(); // not promised either way

    c.gateways[0].daemon.kill();
    drop(f); // its gateway is gone: the close fails, as it may
    force_unmount(&c.gateways[0].mount);

    let got = fs::read(b("d/kept")).unwrap();
    assert!(got.len() >= data.len(), "fsynced bytes lost: {} of {}", got.len(), data.len());
    assert!(got[..data.len()] == data[..], "the fsynced bytes differ");
    assert_eq!(fs::read(b("d/small")).unwrap(), b"small, fsynced");
    let mut names: Vec<String> = fs::read_dir(b("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["kept", "small"]);
    for n in &names {
        fs::read(b(&format!("d/{n}"))).unwrap_or_else(|e| panic!("{n} is listed but not readable: {e}"));
    }
}

/// Callbacks the servers waited for, by how the wait ended: `acked`, or
/// `expired` (the gateway's lease ran out before it acknowledged them).
fn callbacks(c: &Cluster, outcome: &str) -> f64 {
    let pages = c.storage.iter().filter_map(|d| d.metrics_url()).map(|u| http_get(&u));
    pages.map(|p| http::sum(&p, "imca_storage_callbacks_total", &[&format!("outcome=\"{outcome}\"")])).sum()
}
