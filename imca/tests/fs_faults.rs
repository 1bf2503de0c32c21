//! A storage server that dies or hangs: operations needing it fail promptly
//! with EIO, and succeed again once it is back.

mod common;

use common::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Every unit of a 1 MiB file: both servers hold part of it.
fn data() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i * 7 % 251) as u8).collect()
}

#[track_caller]
fn assert_eio_within<T: std::fmt::Debug>(what: &str, bound: Duration, f: impl FnOnce() -> std::io::Result<T>) {
    let start = Instant::now();
    let r = f();
    let took = start.elapsed();
    match r {
        Ok(v) => panic!("{what}: expected EIO, got Ok({v:?})"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{what}: expected EIO, got {e}"),
    }
    assert!(took < bound, "{what} took {took:?} to fail (bound {bound:?})");
}

/// The storage servers' kernel lease (`--kernel-lease`, 1 s by default) with
/// room for a loaded machine: past this nothing is answered from the lease.
const LEASE_BOUND: Duration = Duration::from_secs(5);

#[test]
fn storage_server_killed_and_restarted() {
    let mut c = ClusterSpec::new().timeout(2.0).storage_arg("--kernel-lease=1").start();
    fs::write(c.path("f"), data()).unwrap();
    fs::create_dir(c.path("d")).unwrap();

    c.storage[1].kill();
    let bound = Duration::from_secs(10);
    assert_eio_within("read", bound, || fs::read(c.path("f")));
    // With kernel caching (the default) the gateway may answer a stat from
    // what it was told under its lease (this write's own answer), but never
    // past that lease: the dead server renews nothing.
    let killed = Instant::now();
    loop {
        match fs::metadata(c.path("f")) {
            Ok(m) => {
                assert_eq!(m.len(), 1 << 20, "a remembered stat is the file's");
                assert!(killed.elapsed() < LEASE_BOUND, "stat still answered {:?} after the kill", killed.elapsed());
                std::thread::yield_now();
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "stat: expected EIO, got {e}");
                break;
            }
        }
    }
    assert_eio_within("create", bound, || fs::write(c.path("d/new"), b"x"));
    assert_eio_within("mkdir", bound, || fs::create_dir(c.path("d/sub")));

    c.storage[1].restart();
    // the connection comes back by itself; allow it a moment, bounded
    let start = Instant::now();
    let back = loop {
        match fs::read(c.path("f")) {
            Ok(d) => break d,
            Err(e) if start.elapsed() < Duration::from_secs(30) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
                std::thread::yield_now();
            }
            Err(e) => panic!("still failing 30 s after the restart: {e}"),
        }
    };
    assert_eq!(back, data());
    // what failed while the server was down left nothing half-made behind
    fs::write(c.path("d/new"), b"x").unwrap();
    fs::create_dir(c.path("d/sub")).unwrap();
    assert_eq!(fs::read(c.path("d/new")).unwrap(), b"x");
    let mut names: Vec<_> = fs::read_dir(c.path("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, vec!["new", "sub"]);
}

#[test]
fn hung_storage_server_times_out() {
    // Every read must reach the servers (with the kernel's cache on, the
    // pages this write leaves would answer it without them).
    let c = ClusterSpec::new().timeout(1.5).kernel_cache(false).start();
    fs::write(c.path("f"), data()).unwrap();
    let f = fs::File::open(c.path("f")).unwrap();
    c.storage[0].signal(libc::SIGSTOP);
    let mut buf = vec![0u8; 4096];
    assert_eio_within("read from a hung server", Duration::from_secs(10), || f.read_at(&mut buf, 0));
    c.storage[0].signal(libc::SIGCONT);
    let start = Instant::now();
    loop {
        match f.read_at(&mut buf, 0) {
            Ok(n) => {
                assert_eq!(n, 4096);
                assert_eq!(&buf[..], &data()[..4096]);
                break;
            }
            Err(e) if start.elapsed() < Duration::from_secs(30) => assert_eq!(e.raw_os_error(), Some(libc::EIO)),
            Err(e) => panic!("still failing 30 s after SIGCONT: {e}"),
        }
    }
}
