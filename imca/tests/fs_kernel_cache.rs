//! Coherent kernel caching through real mounts: the kernel answers repeated
//! stats and reads without asking the gateway, and a change made through
//! another gateway is called back before it is acknowledged, so it is seen
//! at once; a frozen gateway holds a writer up for at most one lease.

mod coherence_support;
mod common;

use coherence_support::http;
use common::{Cluster, ClusterSpec};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};

/// Requests for `op` that reached gateway `g` (io-stats, under the kernel).
fn gateway_ops(c: &Cluster, g: usize, op: &str) -> f64 {
    let u = c.gateways[g].daemon.metrics_url().expect("gateway metrics");
    http::sum(&common::http_get(&u), "imca_gateway_ops_total", &[&format!("op=\"{op}\"")])
}

/// Requests for `op` gateway `g` answered by itself (`answered_here`).
fn answered_here(c: &Cluster, g: usize, op: &str) -> f64 {
    let u = c.gateways[g].daemon.metrics_url().expect("gateway metrics");
    http::sum(&common::http_get(&u), "imca_gateway_answered_here_total", &[&format!("op=\"{op}\"")])
}

fn reaching_gateway(c: &Cluster, g: usize) -> f64 {
    ["lookup", "getattr", "read"].iter().map(|op| gateway_ops(c, g, op)).sum()
}

fn storage_sum(c: &Cluster, metric: &str, label: &str) -> f64 {
    c.storage.iter().filter_map(|d| d.metrics_url()).map(|u| http::sum(&common::http_get(&u), metric, &[label])).sum()
}

/// How many directories' attributes gateway 0 knew ahead of its kernel's
/// asking after a change there (carried by the change's answer, or fetched
/// right after it).
fn dirs_fetched_ahead(c: &Cluster) -> f64 {
    let u = c.gateways[0].daemon.metrics_url().expect("gateway metrics");
    http::sum(&common::http_get(&u), "imca_gateway_dir_attrs_ahead_total", &[])
}

/// Wait until gateway 0 knew more directories' attributes ahead than `past`.
fn wait_fetched_ahead(c: &Cluster, past: f64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while dirs_fetched_ahead(c) <= past {
        assert!(std::time::Instant::now() < deadline, "the directory's attributes were not known ahead");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Getattrs that reached the storage servers.
fn storage_getattrs(c: &Cluster) -> f64 {
    storage_sum(c, "imca_storage_ops_total", "op=\"getattr\"")
}

/// Stat and read `p` `n` times; returns how many requests reached gateway 0.
fn stat_and_read(c: &Cluster, p: &std::path::Path, want: &[u8], n: usize) -> f64 {
    let before = reaching_gateway(c, 0);
    for _ in 0..n {
        assert_eq!(std::fs::metadata(p).unwrap().len(), want.len() as u64);
        assert_eq!(std::fs::read(p).unwrap(), want);
    }
    reaching_gateway(c, 0) - before
}

#[test]
fn repeated_stats_and_reads_are_answered_by_the_kernel() {
    let data = vec![7u8; 200_000];
    let on = ClusterSpec::new().start();
    std::fs::write(on.path("f"), &data).unwrap();
    stat_and_read(&on, &on.path("f"), &data, 1);
    // Leases are a second long: 50 rounds fit in one with room to spare on
    // a loaded machine, and a renewal on the way costs a request or two.
    let reached = stat_and_read(&on, &on.path("f"), &data, 50);
    assert!(reached <= 12.0, "{reached} requests reached the gateway for 50 stats and reads");

    // The same with the kernel's cache off: every one reaches the gateway.
    let off = ClusterSpec::new().kernel_cache(false).start();
    std::fs::write(off.path("f"), &data).unwrap();
    let reached = stat_and_read(&off, &off.path("f"), &data, 50);
    assert!(reached >= 100.0, "only {reached} requests reached the gateway with --kernel-cache=off");
}

#[test]
fn changes_through_another_gateway_are_seen_at_once() {
    let c = ClusterSpec::new().gateways(2).start();
    let (a, b) = (|rel: &str| c.path_at(0, rel), |rel: &str| c.path_at(1, rel));
    std::fs::create_dir(a("d")).unwrap();
    std::fs::write(a("d/f"), b"first version").unwrap();
    std::fs::write(a("g"), b"to be removed").unwrap();

    // Gateway 0's kernel holds the entry, the attributes and the pages ...
    stat_and_read(&c, &a("d/f"), b"first version", 2);
    assert!(stat_and_read(&c, &a("d/f"), b"first version", 5) <= 4.0, "gateway 0 is not caching");
    std::fs::metadata(a("g")).unwrap();

    // ... and sees what gateway 1 changes, the moment it is acknowledged.
    let f = std::fs::OpenOptions::new().write(true).open(b("d/f")).unwrap();
    f.write_all_at(b"SECOND", 0).unwrap();
    assert_eq!(std::fs::read(a("d/f")).unwrap(), b"SECONDversion", "same size, new bytes");
    std::fs::set_permissions(b("d/f"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::metadata(a("d/f")).unwrap().permissions().mode() & 0o777, 0o600);
    f.set_len(6).unwrap();
    assert_eq!(std::fs::read(a("d/f")).unwrap(), b"SECOND");
    drop(f);

    std::fs::remove_file(b("g")).unwrap();
    common::assert_errno(std::fs::metadata(a("g")), libc::ENOENT);
    std::fs::write(b("g"), b"new file, same name").unwrap();
    assert_eq!(std::fs::read(a("g")).unwrap(), b"new file, same name");

    // A directory renamed away under cached entries: found under its new name.
    std::fs::rename(b("d"), b("e")).unwrap();
    common::assert_errno(std::fs::metadata(a("d/f")), libc::ENOENT);
    assert_eq!(std::fs::read(a("e/f")).unwrap(), b"SECOND");
    std::fs::write(b("e/f"), b"third").unwrap();
    assert_eq!(std::fs::read(a("e/f")).unwrap(), b"third");
    std::fs::hard_link(b("e/f"), b("h")).unwrap();
    assert_eq!(std::fs::metadata(a("e/f")).unwrap().nlink(), 2);
    assert!(storage_sum(&c, "imca_storage_callbacks_total", "outcome=\"acked\"") > 0.0, "no callback was acknowledged");
}

#[test]
fn a_frozen_gateway_holds_a_writer_up_for_at_most_its_lease() {
    let c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=1").start();
    let (a, b) = (c.path_at(0, "f"), c.path_at(1, "f"));
    std::fs::write(&a, b"before").unwrap();
    stat_and_read(&c, &a, b"before", 3);

    // Gateway 0 cannot answer its callbacks: gateway 1's write waits for its
    // lease to run out, then goes on (an op times out after 10 s: it would fail).
    c.gateways[0].daemon.signal(libc::SIGSTOP);
    let started = std::time::Instant::now();
    let written = std::fs::write(&b, b"after!");
    let waited = started.elapsed();
    c.gateways[0].daemon.signal(libc::SIGCONT);
    written.unwrap();
    assert!(storage_sum(&c, "imca_storage_callbacks_total", "outcome=\"expired\"") >= 1.0, "the writer did not wait for the lease (took {waited:?})");
    // Its kernel stopped trusting what it cached when its lease ran out.
    assert_eq!(std::fs::read(&a).unwrap(), b"after!");
}

#[test]
fn a_listing_brings_the_attributes_along() {
    let c = ClusterSpec::new().gateways(2).start();
    std::fs::create_dir(c.path_at(0, "many")).unwrap();
    let sizes: Vec<usize> = (0..300).map(|i| if i == 7 { 300_000 } else { i * 10 }).collect();
    for (i, n) in sizes.iter().enumerate() {
        std::fs::write(c.path_at(0, &format!("many/f{i:03}")), vec![1u8; *n]).unwrap();
    }
    // Gateway 1 has seen none of them: `ls -l` = a listing, then a stat of
    // each name; the listing's attributes answer the stats.
    let ops = |g| -> f64 { ["lookup", "getattr"].iter().map(|op| gateway_ops(&c, g, op)).sum() };
    let before = ops(1);
    let mut seen = Vec::new();
    for e in std::fs::read_dir(c.path_at(1, "many")).unwrap() {
        let e = e.unwrap();
        let i: usize = e.file_name().to_str().unwrap()[1..].parse().unwrap();
        seen.push((i, std::fs::symlink_metadata(e.path()).unwrap().len() as usize));
    }
    let asked = ops(1) - before;
    seen.sort();
    assert_eq!(seen, sizes.iter().copied().enumerate().collect::<Vec<_>>(), "names and sizes (one striped over both servers)");
    assert!(asked <= 30.0, "{asked} lookups and getattrs for 300 stats after a listing");
}

/// A bank answer slower than the volume's `timeout_ms` (5 ms) is a miss by
/// design, and a debug build on a loaded machine can be that slow: give
/// the bank a second, on every gateway.
fn relax_bank_timeout(c: &Cluster) {
    c.set_volume_config(serde_json::json!({"timeout_ms": 1000}));
}

/// What one gateway creates, another stats without a storage round trip:
/// the create put the entry and the attributes into the bank (claimed
/// before, filled from its reply), and they are the storage servers' own.
#[test]
fn what_one_gateway_creates_another_stats_from_the_bank() {
    for cache in [common::Cache::Imca(2), common::Cache::Memcached(1)] {
        let c = ClusterSpec::new().gateways(2).cache(cache.clone()).gateway_arg("--admin").gateway_arg("127.0.0.1:0").start();
        relax_bank_timeout(&c);
        let names = ["f", "d", "l"];
        std::fs::write(c.path_at(0, "f"), b"").unwrap();
        std::fs::create_dir(c.path_at(0, "d")).unwrap();
        std::os::unix::fs::symlink("f", c.path_at(0, "l")).unwrap();
        let asked = || -> f64 {
            ["lookup", "getattr"].iter().map(|op| storage_sum(&c, "imca_storage_ops_total", &format!("op=\"{op}\""))).sum()
        };
        // The populates go out after the creates are answered: wait until
        // gateway 0 sent them (an entry and a stat each).
        let u = c.gateways[0].daemon.metrics_url().expect("gateway metrics");
        let populated = || http::sum(&common::http_get(&u), "imca_gateway_cache_total", &["op=\"create\"", "result=\"populate\""]);
        let t0 = std::time::Instant::now();
        while populated() < 6.0 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{cache:?}: the creates' populates were not sent");
            std::thread::yield_now();
        }
        // The root changed (new names): its attributes are asked for anew.
        std::fs::metadata(c.path_at(1, "")).unwrap();
        let before = asked();
        let seen: Vec<_> = names.iter().map(|n| std::fs::symlink_metadata(c.path_at(1, n)).unwrap()).collect();
        assert_eq!(asked() - before, 0.0, "{cache:?}: gateway 1's first stats reached the storage servers");
        for (n, m) in names.iter().zip(&seen) {
            let here = std::fs::symlink_metadata(c.path_at(0, n)).unwrap();
            assert_eq!(
                (m.ino(), m.mode(), m.nlink(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()),
                (here.ino(), here.mode(), here.nlink(), here.size(), here.mtime(), here.mtime_nsec(), here.ctime(), here.ctime_nsec()),
                "{cache:?}: {n} as the bank gave it to gateway 1 and as the creating gateway has it"
            );
        }
        // ... and the same as the storage servers answer now (gateway 1,
        // with its kernel's and the bank's copies dropped by a change).
        std::fs::write(c.path_at(0, "f"), b"grown").unwrap();
        assert_eq!(std::fs::metadata(c.path_at(1, "f")).unwrap().len(), 5, "{cache:?}");
    }
}

/// What one gateway writes, another's first read finds in the bank: a new
/// file's blocks are put by the servers that own them once it is closed,
/// and they are the bytes written; a later write through the first gateway
/// still replaces them (the file is no longer "never cached").
#[test]
fn what_one_gateway_writes_another_first_reads_from_the_bank() {
    for cache in [common::Cache::Imca(2), common::Cache::Memcached(1)] {
        let c = ClusterSpec::new().gateways(2).cache(cache.clone()).gateway_arg("--admin").gateway_arg("127.0.0.1:0").start();
        relax_bank_timeout(&c);
        // small files, and one over several blocks
        let files: Vec<(String, Vec<u8>)> =
            [3_000usize, 1, 700_000].iter().enumerate().map(|(i, n)| (format!("f{i}"), (0..*n).map(|b| (b * 7 + i) as u8).collect())).collect();
        for (n, d) in &files {
            std::fs::write(c.path_at(0, n), d).unwrap();
        }
        let put = || storage_sum(&c, "imca_storage_cache_ops_total", "result=\"at_close\"");
        let t0 = std::time::Instant::now();
        // 1 + 1 + 6 blocks of 128 KiB (the test clusters' block size)
        while put() < 8.0 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{cache:?}: the closed files' blocks were not put ({} so far)", put());
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let reads = || storage_sum(&c, "imca_storage_ops_total", "op=\"read\"");
        let before = reads();
        for (n, d) in &files {
            assert_eq!(&std::fs::read(c.path_at(1, n)).unwrap(), d, "{cache:?}: {n} read through gateway 1");
        }
        assert_eq!(reads() - before, 0.0, "{cache:?}: gateway 1's first reads reached the storage servers");
        // a later write through gateway 0 is what gateway 1 reads next
        let f = std::fs::OpenOptions::new().write(true).open(c.path_at(0, "f0")).unwrap();
        f.write_all_at(b"NEW", 10).unwrap();
        let mut want = files[0].1.clone();
        want[10..13].copy_from_slice(b"NEW");
        assert_eq!(std::fs::read(c.path_at(1, "f0")).unwrap(), want, "{cache:?}: the write after the put");
    }
}

fn setx(p: &std::path::Path, name: &str, v: &[u8]) -> std::io::Result<()> {
    let (p, n) = (std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap(), std::ffi::CString::new(name).unwrap());
    match unsafe { libc::lsetxattr(p.as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn getx(p: &std::path::Path, name: &str) -> std::io::Result<Vec<u8>> {
    let (p, n) = (std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap(), std::ffi::CString::new(name).unwrap());
    let mut buf = vec![0u8; 4096];
    match unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) } {
        r if r >= 0 => Ok(buf[..r as usize].to_vec()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn listx(p: &std::path::Path) -> Vec<String> {
    let p = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::llistxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(r >= 0, "llistxattr: {}", std::io::Error::last_os_error());
    buf[..r as usize].split(|b| *b == 0).filter(|n| !n.is_empty()).map(|n| String::from_utf8_lossy(n).into_owned()).collect()
}

fn has_xattr(p: &std::path::Path, name: &str) -> bool {
    let (p, n) = (std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap(), std::ffi::CString::new(name).unwrap());
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    if r < 0 {
        assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ENODATA), "lgetxattr {name}");
    }
    r >= 0
}

/// The kernel asks for `security.capability` before every write (a write
/// drops a file's capabilities): the gateway answers "none" itself while it
/// knows there is none, and a capability set through another gateway is
/// called back, so a write still drops it.
#[test]
fn writes_do_not_ask_for_capabilities_each_time_yet_still_drop_them() {
    let c = ClusterSpec::new().gateways(2).storage_arg("--allow-setid").start();
    let (a, b) = (c.path_at(0, "f"), c.path_at(1, "f"));
    std::fs::write(&a, b"x").unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&a).unwrap();
    f.write_all_at(b"y", 0).unwrap();
    let before = gateway_ops(&c, 0, "getxattr");
    for i in 0..50 {
        f.write_all_at(b"y", i).unwrap();
    }
    let asked = gateway_ops(&c, 0, "getxattr") - before;
    assert!(asked <= 3.0, "{asked} capability lookups reached the servers for 50 writes");

    // A capability (VFS_CAP_REVISION_2, no bits) set through gateway 1 ...
    let mut caps = 0x0200_0000u32.to_le_bytes().to_vec();
    caps.extend_from_slice(&[0u8; 16]);
    setx(&b, "security.capability", &caps).unwrap();
    assert!(has_xattr(&a, "security.capability"), "gateway 0 sees the capability");
    // ... is dropped by gateway 0's next write, as on a local disk.
    f.write_all_at(b"z", 0).unwrap();
    assert!(!has_xattr(&b, "security.capability"), "the write through gateway 0 left the capability on");
    assert_eq!(std::fs::read(&b).unwrap()[0], b'z');
}

/// A name added to a directory here makes the kernel drop the directory's
/// attributes and ask for them at its next path walk. The change's answer
/// carries them as they are just after it (each server's copy, merged), so
/// that GETATTR is answered here with the attributes after the change (the
/// same as another gateway sees), also when a write follows the create at
/// once, and no getattr reaches the servers.
#[test]
fn a_directorys_attributes_come_with_the_answer_when_a_name_is_added_here() {
    let c = ClusterSpec::new().gateways(2).start();
    let ahead = || dirs_fetched_ahead(&c);
    let wait_ahead = |past: f64| wait_fetched_ahead(&c, past);
    let asked = || -> f64 { ["lookup", "getattr"].iter().map(|op| storage_sum(&c, "imca_storage_ops_total", &format!("op=\"{op}\""))).sum() };
    let d = c.path_at(0, "d");
    let before = ahead();
    std::fs::create_dir(&d).unwrap();
    wait_ahead(before);
    let add: [(&str, &dyn Fn(&std::path::Path)); 3] = [
        ("mkdir", &|p| std::fs::create_dir(p).unwrap()),
        ("create and write", &|p| std::fs::write(p, b"x").unwrap()),
        ("symlink", &|p| std::os::unix::fs::symlink("t", p).unwrap()),
    ];
    for (i, (what, add)) in add.iter().enumerate() {
        let (before, getattrs) = (ahead(), storage_getattrs(&c));
        add(&d.join(format!("n{i}")));
        wait_ahead(before);
        let (servers, here) = (asked(), answered_here(&c, 0, "getattr"));
        let seen = std::fs::metadata(&d).unwrap();
        assert_eq!(asked() - servers, 0.0, "{what}: the directory's attributes were asked of the servers");
        assert_eq!(storage_getattrs(&c) - getattrs, 0.0, "{what}: a getattr reached the servers (none is sent ahead)");
        assert!(answered_here(&c, 0, "getattr") > here, "{what}: not answered by the gateway");
        let there = std::fs::metadata(c.path_at(1, "d")).unwrap();
        let key = |m: &std::fs::Metadata| (m.nlink(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
        assert_eq!(key(&seen), key(&there), "{what}: the attributes after the change");
    }
}

/// A removal or a rename here forgets only what it touched: a directory made
/// here stays known whole (the lookup before a create in it is answered
/// "absent" here, the servers not asked), its attributes after the change
/// come with the answer (GETATTR answered here, the same as another gateway
/// sees, and no getattr reaches the servers); and a name another gateway
/// then adds, even one just removed here, is seen here at once.
#[test]
fn a_removal_here_forgets_only_what_it_touched() {
    let c = ClusterSpec::new().gateways(2).start();
    let ahead = || dirs_fetched_ahead(&c);
    let wait_ahead = |past: f64| wait_fetched_ahead(&c, past);
    let lookups = || storage_sum(&c, "imca_storage_ops_total", "op=\"lookup\"");
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));
    std::fs::create_dir(a("d")).unwrap();
    for n in ["n0", "n1", "n2"] {
        std::fs::write(a(&format!("d/{n}")), n).unwrap();
    }
    let remove: [(&str, &dyn Fn()); 3] = [
        ("unlink", &|| std::fs::remove_file(a("d/n0")).unwrap()),
        ("rename", &|| std::fs::rename(a("d/n1"), a("d/m1")).unwrap()),
        ("rmdir", &|| {
            std::fs::create_dir(a("d/sub")).unwrap();
            std::fs::remove_dir(a("d/sub")).unwrap()
        }),
    ];
    for (i, (what, remove)) in remove.iter().enumerate() {
        let (before, getattrs) = (ahead(), storage_getattrs(&c));
        remove();
        wait_ahead(before);
        let here = answered_here(&c, 0, "getattr");
        let seen = std::fs::metadata(a("d")).unwrap();
        assert!(answered_here(&c, 0, "getattr") > here, "{what}: the directory's attributes were not answered here");
        assert_eq!(storage_getattrs(&c) - getattrs, 0.0, "{what}: a getattr reached the servers (none is sent ahead)");
        let there = std::fs::metadata(b("d")).unwrap();
        let key = |m: &std::fs::Metadata| (m.nlink(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
        assert_eq!(key(&seen), key(&there), "{what}: the directory's attributes after the change");
        let (servers, absent) = (lookups(), answered_here(&c, 0, "lookup_absent"));
        std::fs::write(a(&format!("d/new{i}")), b"x").unwrap();
        assert_eq!(lookups() - servers, 0.0, "{what}: a lookup in the directory reached the servers");
        assert!(answered_here(&c, 0, "lookup_absent") > absent, "{what}: the new name was not known absent here");
    }
    assert_eq!(std::fs::read(a("d/m1")).unwrap(), b"n1");
    common::assert_errno(std::fs::metadata(a("d/n1")), libc::ENOENT);
    // what a rename here moved comes with its attributes after it (its
    // ctime changed): its stat, and the unlink that often follows, ask
    // the servers nothing
    std::fs::write(a("d/r0"), b"r").unwrap();
    std::fs::rename(a("d/r0"), a("d/r1")).unwrap();
    let (servers, getattrs) = (lookups(), storage_getattrs(&c));
    let here = std::fs::metadata(a("d/r1")).unwrap();
    assert_eq!(lookups() - servers + storage_getattrs(&c) - getattrs, 0.0, "the renamed file's stat reached the servers");
    let there = std::fs::metadata(b("d/r1")).unwrap();
    let key = |m: &std::fs::Metadata| (m.ino(), m.nlink(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
    assert_eq!(key(&here), key(&there), "the renamed file's attributes, here and through gateway 1");
    // names another gateway adds are seen here at once, a removed one too
    std::fs::write(b("d/n0"), b"again").unwrap();
    std::fs::write(b("d/y"), b"y").unwrap();
    assert_eq!(std::fs::read(a("d/n0")).unwrap(), b"again");
    assert_eq!(std::fs::read(a("d/y")).unwrap(), b"y");
    let mut names: Vec<String> = std::fs::read_dir(a("d")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["m1", "n0", "n2", "new0", "new1", "new2", "r1", "y"]);
}

/// A write waits only for the gateways that hold the file (told the servers
/// before their kernels cached it): gateway 1, which read it, is called
/// back and acknowledges before the write is answered; gateway 2, which
/// never saw it, is not waited for, yet gets the invalidations at its next
/// poll (counted as not held there, nothing applied).
#[test]
fn writes_wait_only_for_the_gateways_that_hold_the_file() {
    let c = ClusterSpec::new().gateways(3).start();
    let count = |g: usize, held: &str| {
        let u = c.gateways[g].daemon.metrics_url().expect("gateway metrics");
        http::sum(&common::http_get(&u), "imca_gateway_callbacks_total", &[&format!("kernel=\"{held}\"")])
    };
    let waits = |outcome: &str| storage_sum(&c, "imca_storage_callbacks_total", &format!("outcome=\"{outcome}\""));
    std::fs::write(c.path_at(0, "f"), b"one").unwrap();
    // Gateway 1 reads f until its kernel answers: by then f is held.
    let answered = |g: usize| reaching_gateway(&c, g);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        assert_eq!(std::fs::read(c.path_at(1, "f")).unwrap(), b"one");
        let before = answered(1);
        assert_eq!(std::fs::read(c.path_at(1, "f")).unwrap(), b"one");
        if answered(1) == before {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "gateway 1 never held f");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let before = (count(1, "held"), count(2, "not_held"), waits("acked"), waits("not_held"));
    std::fs::write(c.path_at(0, "f"), b"two!").unwrap();
    // (answered only once gateway 1 acknowledged: no waiting for it here)
    assert!(count(1, "held") > before.0, "gateway 1 holds f: called back before the write was answered");
    assert!(waits("acked") > before.2, "the servers waited for gateway 1");
    assert!(waits("not_held") > before.3, "the servers did not wait for gateway 2");
    assert_eq!(std::fs::read(c.path_at(1, "f")).unwrap(), b"two!");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count(2, "not_held") <= before.1 {
        assert!(std::time::Instant::now() < deadline, "gateway 2 never got the invalidation");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(std::fs::read(c.path_at(2, "f")).unwrap(), b"two!");
}

/// A gateway gives a hold back once its kernel forgot the inode (here:
/// the file is removed through it, so the kernel evicts it): the servers
/// stop counting it, and stop waiting for this gateway on it.
#[test]
fn a_hold_is_given_back_once_the_kernel_forgets_the_file() {
    let c = ClusterSpec::new().gateways(2).start();
    let gauge = |what: &str| {
        let u = c.gateways[1].daemon.metrics_url().expect("gateway metrics");
        http::sum(&common::http_get(&u), what, &[])
    };
    let given_back = || {
        let u = c.gateways[1].daemon.metrics_url().expect("gateway metrics");
        http::sum(&common::http_get(&u), "imca_gateway_hold_rounds_total", &["outcome=\"given_back\""])
    };
    let servers_hold = || storage_sum(&c, "imca_storage_kernel_cache_holds", "");
    std::fs::write(c.path_at(0, "f"), b"one").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let before = (gauge("imca_gateway_holds"), servers_hold());
    // Gateway 1 looks at f until the servers hold it for gateway 1.
    while gauge("imca_gateway_holds") <= before.0 {
        assert!(std::time::Instant::now() < deadline, "f was never held");
        assert_eq!(std::fs::read(c.path_at(1, "f")).unwrap(), b"one");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(servers_hold() > before.1, "the servers record the hold");
    let (held, on_servers, rounds) = (gauge("imca_gateway_holds"), servers_hold(), given_back());
    std::fs::remove_file(c.path_at(1, "f")).unwrap();
    while given_back() <= rounds {
        assert!(std::time::Instant::now() < deadline, "the kernel's FORGET never gave the hold back");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(gauge("imca_gateway_holds") < held, "still counted held");
    assert!(servers_hold() < on_servers, "the servers still hold it for gateway 1");
}

/// By default the storage hosts' SELinux labels are not shown: the gateway
/// answers EOPNOTSUPP itself, so `ls -l` asks once, not for every name, and
/// no request reaches the servers; other xattrs pass as before.
#[test]
fn labels_are_not_passed_through_by_default_so_ls_asks_once() {
    let mut c = ClusterSpec::new().start();
    let labels = c.add_gateway(&["--selinux"]);
    let names: Vec<_> = (0..20).map(|i| format!("f{i}")).collect();
    for n in &names {
        std::fs::write(c.path_at(0, n), b"x").unwrap();
    }
    setx(&c.path_at(labels, "f7"), "security.selinux", b"system_u:object_r:imca_test_t:s0").unwrap();
    assert!(has_xattr(&c.path_at(labels, "f7"), "security.selinux"), "a mount with --selinux shows it");
    let f7 = c.path_at(0, "f7");
    let before = (gateway_ops(&c, 0, "getxattr"), answered_here(&c, 0, "selinux"));
    common::assert_errno(getx(&f7, "security.selinux"), libc::EOPNOTSUPP);
    common::assert_errno(setx(&f7, "security.selinux", b"x"), libc::EOPNOTSUPP);
    assert_eq!(gateway_ops(&c, 0, "getxattr"), before.0, "asked of the servers");
    assert!(!listx(&f7).contains(&"security.selinux".to_string()), "listed: {:?}", listx(&f7));
    setx(&f7, "user.k", b"v").unwrap();
    assert_eq!(getx(&f7, "user.k").unwrap(), b"v");
    assert!(listx(&f7).contains(&"user.k".to_string()));

    let ls = std::process::Command::new("ls").arg("-l").arg(c.path_at(0, "")).output().unwrap();
    assert!(ls.status.success(), "{}", String::from_utf8_lossy(&ls.stderr));
    let asked = answered_here(&c, 0, "selinux") - before.1 - 1.0;
    assert!(asked <= 2.0, "ls -l of 20 files asked for labels {asked} times");
}

/// With `--selinux`, `ls -l` asks for every listed name's label: the
/// gateway answers "none" itself once a server said so, and a label set
/// through another gateway is called back, so it shows at once.
#[test]
fn labels_asked_by_ls_are_answered_here_and_a_label_set_elsewhere_shows() {
    let c = ClusterSpec::new().gateways(2).gateway_arg("--selinux").start();
    let names: Vec<_> = (0..20).map(|i| format!("f{i}")).collect();
    for n in &names {
        std::fs::write(c.path_at(1, n), b"x").unwrap();
    }
    let label_everything = || names.iter().filter(|n| has_xattr(&c.path_at(0, n), "security.selinux")).count();
    assert_eq!(label_everything(), 0);
    let before = gateway_ops(&c, 0, "getxattr");
    for _ in 0..3 {
        assert_eq!(label_everything(), 0);
    }
    let asked = gateway_ops(&c, 0, "getxattr") - before;
    // (a lease renewed after it lapsed forgets everything: allow one round)
    assert!(asked <= 20.0, "{asked} label requests reached the servers for 60 asked again");

    setx(&c.path_at(1, "f7"), "security.selinux", b"system_u:object_r:imca_test_t:s0").unwrap();
    assert!(has_xattr(&c.path_at(0, "f7"), "security.selinux"), "gateway 0 sees the label set through gateway 1");
    assert_eq!(label_everything(), 1);
}

/// Entries and attributes the kernel let expire (their TTL is at most the
/// lease left when they were given) are re-validated by the gateway from
/// what it answered, while its lease held and nothing was called back: a
/// walk longer than a lease does not go back to the servers. A change
/// through another gateway still shows.
#[test]
fn expired_entries_are_revalidated_by_the_gateway() {
    let c = ClusterSpec::new().gateways(2).storage_arg("--kernel-lease=0.3").start();
    std::fs::create_dir(c.path_at(0, "d")).unwrap();
    for i in 0..50 {
        std::fs::write(c.path_at(0, &format!("d/f{i}")), format!("{i}")).unwrap();
    }
    let stat_all = || -> Vec<u64> { (0..50).map(|i| std::fs::metadata(c.path_at(0, &format!("d/f{i}"))).unwrap().len()).collect() };
    let want: Vec<u64> = (0..50).map(|i: u64| i.to_string().len() as u64).collect();
    assert_eq!(stat_all(), want);
    let asked = || -> f64 {
        ["lookup", "getattr"].iter().map(|op| storage_sum(&c, "imca_storage_ops_total", &format!("op=\"{op}\""))).sum()
    };
    let before = (asked(), gateway_ops(&c, 0, "lookup"));
    // Three leases later every TTL the kernel got has run out.
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert_eq!(stat_all(), want);
    assert_eq!(asked() - before.0, 0.0, "re-validations reached the storage servers");

    // What gateway 1 changes is called back: gateway 0 forgets it too.
    std::fs::write(c.path_at(1, "d/f7"), b"seven").unwrap();
    std::fs::remove_file(c.path_at(1, "d/f8")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert_eq!(std::fs::metadata(c.path_at(0, "d/f7")).unwrap().len(), 5);
    common::assert_errno(std::fs::metadata(c.path_at(0, "d/f8")), libc::ENOENT);
    // ... and what gateway 0 changes itself, it forgets at once.
    std::fs::write(c.path_at(0, "d/f9"), b"nine!!").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    assert_eq!(std::fs::metadata(c.path_at(0, "d/f9")).unwrap().len(), 6);
    let _ = before.1;
}

/// An open does not hold the application up, and one closed within a few
/// milliseconds (a small file read from the kernel's pages) never reaches
/// the servers: its release cancels it. One held open longer is counted
/// there, so the file outlives an unlink through another gateway.
#[test]
fn quick_opens_cost_the_servers_nothing() {
    let c = ClusterSpec::new().gateways(2).start();
    let (a, b) = (c.path_at(0, "f"), c.path_at(1, "f"));
    std::fs::write(&a, b"small").unwrap();
    assert_eq!(std::fs::read(&a).unwrap(), b"small");
    let opens = || storage_sum(&c, "imca_storage_ops_total", "op=\"open\"");
    let before = opens();
    for _ in 0..20 {
        assert_eq!(std::fs::read(&a).unwrap(), b"small");
    }
    let quick = opens();
    assert!(quick - before <= 2.0, "{} opens reached the servers for 20 quick reads", quick - before);

    // Held open past the delay: counted, so an unlink elsewhere leaves it readable.
    let f = std::fs::File::open(&a).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while opens() <= quick {
        assert!(std::time::Instant::now() < deadline, "the open of a file kept open never reached the servers");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::remove_file(&b).unwrap();
    // past the removal holds (two 1 s leases): only the open count keeps it
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let mut got = [0u8; 5];
    f.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"small");
}

/// An untar asks LOOKUP before every create: in a directory made through
/// this gateway, the gateway knows every name and answers it (a file just
/// made also needs no capability check before its first write). A name
/// another gateway adds there is still seen at once, and a name this
/// gateway's create finds taken elsewhere is not hidden.
#[test]
fn names_in_a_directory_made_here_are_known_without_asking() {
    let c = ClusterSpec::new().gateways(2).start();
    std::fs::create_dir(c.path_at(0, "d")).unwrap();
    let lookups = || storage_sum(&c, "imca_storage_ops_total", "op=\"lookup\"");
    let caps = || storage_sum(&c, "imca_storage_ops_total", "op=\"getxattr\"");
    let (l0, x0) = (lookups(), caps());
    for i in 0..50 {
        std::fs::write(c.path_at(0, &format!("d/f{i}")), format!("{i}")).unwrap();
    }
    std::fs::create_dir(c.path_at(0, "d/sub")).unwrap();
    std::fs::write(c.path_at(0, "d/sub/g"), b"g").unwrap();
    let (asked, capped) = (lookups() - l0, caps() - x0);
    assert!(asked <= 5.0, "{asked} lookups reached the servers for 52 new names");
    assert!(capped <= 5.0, "{capped} capability checks reached the servers for 51 new files");
    assert!(std::fs::metadata(c.path_at(0, "d/nothing")).is_err());

    // Another gateway adds names: seen through this one at once.
    std::fs::write(c.path_at(1, "d/other"), b"o").unwrap();
    assert_eq!(std::fs::read(c.path_at(0, "d/other")).unwrap(), b"o");
    std::fs::create_dir(c.path_at(1, "d/sub/odir")).unwrap();
    assert!(std::fs::metadata(c.path_at(0, "d/sub/odir")).unwrap().is_dir());
    // ... also when it races a create here: O_EXCL fails, a plain create opens it
    std::fs::create_dir(c.path_at(0, "e")).unwrap();
    std::fs::write(c.path_at(1, "e/x"), b"theirs").unwrap();
    let err = std::fs::OpenOptions::new().write(true).create_new(true).open(c.path_at(0, "e/x")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(std::fs::read(c.path_at(0, "e/x")).unwrap(), b"theirs");
    for i in 0..50 {
        assert_eq!(std::fs::read(c.path_at(1, &format!("d/f{i}"))).unwrap(), format!("{i}").as_bytes());
    }
}

/// What an untar does to each file: create, write (here: a first write
/// across two servers, one extending it onto a third, one into the
/// middle), then tar's fchown, fchmod and utimensat; `after_each` step.
/// After every write the kernel asks for the attributes again.
fn untar_like(p: &std::path::Path, i: u32, times: std::fs::FileTimes, mut after_each: impl FnMut()) {
    let f = std::fs::OpenOptions::new().write(true).create_new(true).open(p).unwrap();
    for (at, len, byte) in [(0, 6000, 1u8), (6000, 5000, 2), (3000, 100, 3)] {
        f.write_all_at(&vec![byte; len], at).unwrap();
        after_each();
    }
    std::os::unix::fs::fchown(&f, Some(1000 + i), Some(2000 + i)).unwrap();
    after_each();
    f.set_permissions(std::fs::Permissions::from_mode(0o640)).unwrap();
    after_each();
    f.set_times(times).unwrap();
    after_each();
}

/// What `stat` shows that a write or a setattr may change.
fn shown(p: &std::path::Path) -> (u64, u64, u32, u32, u32, i64, i64, i64, i64) {
    let m = std::fs::metadata(p).unwrap();
    (m.size(), m.blocks(), m.mode(), m.uid(), m.gid(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
}

/// The blocks of `rel`'s copies on the storage servers' disks, together.
fn blocks_on_disk(c: &Cluster, rel: &str) -> u64 {
    c.storage.iter().enumerate().map(|(k, _)| std::fs::metadata(c.export(k).join(rel)).unwrap().blocks()).sum()
}

/// A write's and a setattr's answers leave the file's attributes known to
/// the gateway that sent them (the kernel's GETATTR after a write is
/// answered there), and exactly: the same as another gateway, asking the
/// servers, sees. A write through another gateway in between is called
/// back, so what this one then derives is not built on stale attributes.
#[test]
fn attributes_after_writes_and_setattrs_are_known_without_asking() {
    const N: u32 = 30;
    let c = ClusterSpec::new().storage(3).stripe_unit(4096).gateways(2).start();
    std::fs::create_dir(c.path_at(0, "d")).unwrap();
    // Server 2's: a file's getattr asks every server, a directory's only
    // server 0 (the kernel asks for d's before each create: a create here
    // changed it).
    let getattrs = || {
        let u = c.storage[2].metrics_url().expect("storage metrics");
        http::sum(&common::http_get(&u), "imca_storage_ops_total", &["op=\"getattr\""])
    };
    let all_getattrs = || storage_sum(&c, "imca_storage_ops_total", "op=\"getattr\"");
    let before_all = all_getattrs();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::new(1_500_000_000, 123_456_789);
    let times = std::fs::FileTimes::new().set_accessed(mtime).set_modified(mtime);
    let before = getattrs();
    for i in 0..N {
        untar_like(&c.path_at(0, &format!("d/f{i}")), i, times, || {});
    }
    let asked = getattrs() - before;
    eprintln!("{asked} file getattrs at server 2, {} at all servers, for {N} files", all_getattrs() - before_all);
    assert!(asked <= 2.0, "{asked} getattrs of files reached the storage servers for {N} untarred files");

    for i in 0..N {
        let rel = format!("d/f{i}");
        let here = shown(&c.path_at(0, &rel));
        let want = (11_000, blocks_on_disk(&c, &rel), 0o100640, 1000 + i, 2000 + i, 1_500_000_000, 123_456_789);
        assert_eq!((here.0, here.1, here.2, here.3, here.4, here.5, here.6), want, "{rel} through gateway 0");
        assert_eq!(shown(&c.path_at(1, &rel)), here, "{rel}: gateway 1 (asking the servers) and gateway 0");
    }

    // ... and so after each step (what the kernel asks before tar's fchown).
    let (a, b) = (c.path_at(0, "d/step"), c.path_at(1, "d/step"));
    untar_like(&a, 7, times, || {
        let here = shown(&a);
        assert_eq!(here.1, blocks_on_disk(&c, "d/step"), "blocks through gateway 0");
        assert_eq!(shown(&b), here, "gateway 1 (asking the servers) and gateway 0");
    });

    // Gateway 1 extends a file gateway 0 holds open and has written.
    let (a, b) = (c.path_at(0, "g"), c.path_at(1, "g"));
    let f = std::fs::OpenOptions::new().write(true).create_new(true).open(&a).unwrap();
    f.write_all_at(&[1u8; 5000], 0).unwrap();
    assert_eq!(std::fs::metadata(&a).unwrap().len(), 5000);
    std::fs::OpenOptions::new().write(true).open(&b).unwrap().write_all_at(&[2u8; 20_000], 5000).unwrap();
    // Gateway 0's next write builds on the attributes after gateway 1's.
    f.write_all_at(b"middle", 4200).unwrap();
    let here = shown(&a);
    assert_eq!((here.0, here.1), (25_000, blocks_on_disk(&c, "g")));
    assert_eq!(shown(&b), here, "gateway 1 and gateway 0 after both wrote");
    f.set_permissions(std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(shown(&b), shown(&a), "after a chmod through gateway 0");
}

/// The kernel's pages of `f`, dropped: the next read is a READ request.
fn drop_pages(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: an advice on an open descriptor; no memory is passed.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Read `p` through a READ request (its pages dropped first).
fn read_fresh(p: &std::path::Path) -> Vec<u8> {
    let f = std::fs::File::open(p).unwrap();
    drop_pages(&f);
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut &f, &mut v).unwrap();
    v
}

/// A small file written through a gateway is read back through it from
/// the bytes it sent (the kernel does not keep a partly written page), and
/// those bytes go with any change: a write or truncation here, a write
/// through another gateway.
#[test]
fn small_files_written_here_are_read_back_without_a_round_trip() {
    let c = ClusterSpec::new().gateways(2).start();
    let here = || {
        let u = c.gateways[0].daemon.metrics_url().expect("gateway metrics");
        http::sum(&common::http_get(&u), "imca_gateway_answered_here_total", &["op=\"read\""])
    };
    let reads = || storage_sum(&c, "imca_storage_ops_total", "op=\"read\"");
    let body = |i: usize| format!("file {i} ").repeat(i + 1).into_bytes();
    const N: usize = 30;
    for i in 0..N {
        std::fs::write(c.path_at(0, &format!("f{i}")), body(i)).unwrap();
    }
    // written in two steps, then patched inside
    let two = c.path_at(0, "two");
    let f = std::fs::OpenOptions::new().write(true).create_new(true).open(&two).unwrap();
    f.write_all_at(b"hello ", 0).unwrap();
    f.write_all_at(b"world", 6).unwrap();
    f.write_all_at(b"W", 6).unwrap();
    drop(f);
    let (h0, r0) = (here(), reads());
    for i in 0..N {
        assert_eq!(read_fresh(&c.path_at(0, &format!("f{i}"))), body(i));
    }
    assert_eq!(read_fresh(&two), b"hello World");
    let (answered, asked) = (here() - h0, reads() - r0);
    assert!(answered >= (N + 1) as f64, "only {answered} of {} small-file reads answered by the gateway", N + 1);
    assert!(asked <= 2.0, "{asked} reads reached the servers for {} small files written here", N + 1);

    // A write through the other gateway: its bytes, not the remembered ones.
    std::fs::write(c.path_at(1, "f0"), b"theirs").unwrap();
    assert_eq!(read_fresh(&c.path_at(0, "f0")), b"theirs");
    std::fs::OpenOptions::new().write(true).open(c.path_at(1, "f1")).unwrap().write_all_at(b"X", 2).unwrap();
    let mut want = body(1);
    want[2] = b'X';
    assert_eq!(read_fresh(&c.path_at(0, "f1")), want);
    // A truncation here, a write into a hole here: from the servers.
    std::fs::OpenOptions::new().write(true).open(c.path_at(0, "f2")).unwrap().set_len(3).unwrap();
    assert_eq!(read_fresh(&c.path_at(0, "f2")), &body(2)[..3]);
    std::fs::OpenOptions::new().write(true).open(c.path_at(0, "f3")).unwrap().write_all_at(b"!", 100).unwrap();
    let mut want = body(3);
    want.resize(101, 0);
    want[100] = b'!';
    assert_eq!(read_fresh(&c.path_at(0, "f3")), want);
    // Every file reads the same through both gateways.
    for i in 0..N {
        let rel = format!("f{i}");
        assert_eq!(read_fresh(&c.path_at(0, &rel)), read_fresh(&c.path_at(1, &rel)), "{rel}");
    }
}
