//! POSIX, OFD and flock locks across two gateways on one volume: a lock
//! taken through one gateway holds against the other (the file's ordering
//! server keeps the lock table), blocked requests wake on release, a killed
//! gateway's locks go when its lease runs out, and SQLite with one writer
//! per gateway keeps every acknowledged row.

mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Long enough for a busy machine; a lock that never comes fails the test.
const WAKE: Duration = Duration::from_secs(60);

fn open_rw(p: &Path) -> File {
    OpenOptions::new().read(true).write(true).open(p).unwrap()
}

fn flock_struct(typ: i32, start: i64, len: i64) -> libc::flock {
    // SAFETY: plain old data; every field is set or zero.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = typ as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = start;
    l.l_len = len;
    l
}

/// fcntl(F_SETLK/F_SETLKW/F_OFD_*) of one range.
fn setlk(f: &File, cmd: i32, typ: i32, start: i64, len: i64) -> std::io::Result<()> {
    let l = flock_struct(typ, start, len);
    // SAFETY: a valid fd and a valid struct flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &l) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// fcntl(F_GETLK or F_OFD_GETLK): (type, start, len, pid) of what blocks.
fn getlk(f: &File, cmd: i32, typ: i32, start: i64, len: i64) -> (i32, i64, i64, i32) {
    let mut l = flock_struct(typ, start, len);
    // SAFETY: a valid fd and a valid struct flock.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), cmd, &mut l) };
    assert_eq!(r, 0, "getlk: {}", std::io::Error::last_os_error());
    (l.l_type as i32, l.l_start, l.l_len, l.l_pid)
}

fn flock(f: &File, op: i32) -> std::io::Result<()> {
    // SAFETY: a valid fd.
    if unsafe { libc::flock(f.as_raw_fd(), op) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Run `f` on a thread; its result arrives on the returned channel.
fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx
}

#[test]
fn fcntl_locks_hold_across_gateways_and_waiters_wake_on_unlock() {
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "f"), vec![0u8; 100]).unwrap();
    let a = open_rw(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));

    setlk(&a, libc::F_SETLK, libc::F_WRLCK, 10, 20).unwrap();
    assert_errno(setlk(&b, libc::F_SETLK, libc::F_WRLCK, 20, 1), libc::EAGAIN);
    assert_errno(setlk(&b, libc::F_SETLK, libc::F_RDLCK, 0, 0), libc::EAGAIN);
    // F_GETLK through the other gateway names the holder and its range.
    assert_eq!(getlk(&b, libc::F_GETLK, libc::F_RDLCK, 0, 100), (libc::F_WRLCK, 10, 20, std::process::id() as i32));
    assert_eq!(getlk(&b, libc::F_GETLK, libc::F_WRLCK, 30, 10).0, libc::F_UNLCK);
    // Outside the range, through the other gateway: granted.
    setlk(&b, libc::F_SETLK, libc::F_WRLCK, 30, 10).unwrap();
    assert_errno(setlk(&a, libc::F_SETLK, libc::F_RDLCK, 35, 1), libc::EAGAIN);

    // A blocking request through gateway 1 waits while gateway 0 holds.
    let b2 = open_rw(&c.path_at(1, "f"));
    let waiter = in_thread(move || setlk(&b2, libc::F_SETLKW, libc::F_WRLCK, 15, 1).map(|()| b2));
    // Gateway 0's own round trip to the lock server; the lock is still held.
    assert_eq!(getlk(&a, libc::F_GETLK, libc::F_WRLCK, 10, 20).0, libc::F_UNLCK, "own locks never block");
    assert!(waiter.try_recv().is_err(), "F_SETLKW returned while the range was locked");
    // Unlocking part of the range that does not cover byte 15 does not wake it for good.
    setlk(&a, libc::F_SETLK, libc::F_UNLCK, 20, 10).unwrap();
    assert_errno(setlk(&b, libc::F_SETLK, libc::F_WRLCK, 15, 1), libc::EAGAIN);
    setlk(&b, libc::F_SETLK, libc::F_WRLCK, 25, 1).unwrap();
    assert!(waiter.try_recv().is_err(), "F_SETLKW returned while byte 15 was locked");
    setlk(&a, libc::F_SETLK, libc::F_UNLCK, 0, 0).unwrap();
    let b2 = waiter.recv_timeout(WAKE).expect("F_SETLKW woke after the unlock").unwrap();
    assert_errno(setlk(&a, libc::F_SETLK, libc::F_WRLCK, 15, 1), libc::EAGAIN);

    // Closing any descriptor of the file drops the process's POSIX locks
    // (through gateway 1: b, b2 share the owner).
    drop(b2);
    setlk(&a, libc::F_SETLK, libc::F_WRLCK, 0, 0).unwrap();
}

#[test]
fn ofd_locks_hold_across_gateways_and_go_with_the_open_file() {
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "f"), b"x").unwrap();
    let a = open_rw(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));
    setlk(&a, libc::F_OFD_SETLK, libc::F_WRLCK, 0, 0).unwrap();
    assert_errno(setlk(&b, libc::F_OFD_SETLK, libc::F_RDLCK, 0, 1), libc::EAGAIN);
    assert_eq!(getlk(&b, libc::F_OFD_GETLK, libc::F_RDLCK, 0, 1).0, libc::F_WRLCK);
    // The last close of the open file releases it: a waiter then gets it.
    let waiter = in_thread(move || setlk(&b, libc::F_OFD_SETLKW, libc::F_WRLCK, 0, 0).map(|()| b));
    assert!(waiter.try_recv().is_err());
    drop(a);
    let _b = waiter.recv_timeout(WAKE).expect("F_OFD_SETLKW woke after the holder's close").unwrap();
    let a = open_rw(&c.path_at(0, "f"));
    assert_errno(setlk(&a, libc::F_OFD_SETLK, libc::F_RDLCK, 0, 1), libc::EAGAIN);
}

#[test]
fn flock_exclusive_and_shared_across_gateways() {
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "f"), b"x").unwrap();
    let a = File::open(c.path_at(0, "f")).unwrap();
    let b1 = File::open(c.path_at(1, "f")).unwrap();
    let b2 = File::open(c.path_at(1, "f")).unwrap();

    flock(&a, libc::LOCK_EX | libc::LOCK_NB).unwrap();
    assert_errno(flock(&b1, libc::LOCK_SH | libc::LOCK_NB), libc::EWOULDBLOCK);
    assert_errno(flock(&b1, libc::LOCK_EX | libc::LOCK_NB), libc::EWOULDBLOCK);
    // A blocking flock waits for LOCK_UN.
    let waiter = in_thread(move || flock(&b1, libc::LOCK_SH).map(|()| b1));
    flock(&a, libc::LOCK_EX | libc::LOCK_NB).unwrap(); // a round trip of the holder's own
    assert!(waiter.try_recv().is_err(), "flock(LOCK_SH) returned while LOCK_EX was held");
    flock(&a, libc::LOCK_UN).unwrap();
    let b1 = waiter.recv_timeout(WAKE).expect("flock woke after LOCK_UN").unwrap();
    // Shared locks of two open files share; an exclusive one waits for both.
    flock(&b2, libc::LOCK_SH | libc::LOCK_NB).unwrap();
    assert_errno(flock(&a, libc::LOCK_EX | libc::LOCK_NB), libc::EWOULDBLOCK);
    flock(&a, libc::LOCK_SH | libc::LOCK_NB).unwrap();
    flock(&a, libc::LOCK_UN).unwrap();
    // The last close of an open file drops its flock.
    let waiter = in_thread(move || flock(&a, libc::LOCK_EX).map(|()| a));
    drop(b1);
    assert!(waiter.try_recv().is_err(), "b2 still holds a shared lock");
    drop(b2);
    let _a = waiter.recv_timeout(WAKE).expect("flock(LOCK_EX) woke after the last close").unwrap();
}

#[test]
fn a_killed_gateways_locks_are_released_when_its_lease_runs_out() {
    let mut c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "f"), b"x").unwrap();
    let a = open_rw(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));
    setlk(&a, libc::F_SETLK, libc::F_WRLCK, 0, 0).unwrap();
    assert_errno(setlk(&b, libc::F_SETLK, libc::F_WRLCK, 0, 1), libc::EAGAIN);
    let waiter = in_thread(move || setlk(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 0).map(|()| b));
    assert!(waiter.try_recv().is_err());
    c.gateways[0].daemon.kill();
    let b = waiter.recv_timeout(WAKE).expect("the dead gateway's lock was released").unwrap();
    assert_eq!(getlk(&b, libc::F_GETLK, libc::F_WRLCK, 0, 0).0, libc::F_UNLCK);
    std::mem::forget(a); // its mount is gone
}

/// One SQLite writer per gateway on one database: every acknowledged row is
/// there, through either gateway, and the database is intact.
fn sqlite_two_writers(mode: &str) {
    require_tool("python3", "python3");
    let c = ClusterSpec::new().gateways(2).start();
    let db = |g: usize| c.path_at(g, "db.sqlite");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/locks/sqlite_writer.py");
    let sql = |g: usize, q: &str| {
        let out = Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import sqlite3,sys\ncon=sqlite3.connect(sys.argv[1],timeout=120)\nfor r in con.execute(sys.argv[2]): print(*r)"
            ))
            .arg(db(g))
            .arg(q)
            .output()
            .unwrap();
        assert!(out.status.success(), "{q}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    sql(0, "CREATE TABLE t (id INTEGER PRIMARY KEY, who TEXT, i INTEGER, pad TEXT)");
    if mode == "wal-exclusive" {
        assert_eq!(sql(0, "PRAGMA journal_mode=WAL"), "wal");
    }
    const ROWS: usize = 300;
    let writers: Vec<_> = (0..2)
        .map(|g| {
            Command::new("python3")
                .arg(&script)
                .arg(db(g))
                .arg(format!("g{g}"))
                .arg(ROWS.to_string())
                .arg(mode)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (g, w) in writers.into_iter().enumerate() {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "writer {g}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ROWS.to_string(), "writer {g} acknowledged every row");
    }
    for g in 0..2 {
        assert_eq!(sql(g, "PRAGMA integrity_check"), "ok", "through gateway {g}");
        for w in 0..2 {
            assert_eq!(sql(g, &format!("SELECT count(*) FROM t WHERE who = 'g{w}'")), ROWS.to_string(), "rows of writer {w} through gateway {g}");
            assert_eq!(sql(g, &format!("SELECT count(DISTINCT i) FROM t WHERE who = 'g{w}'")), ROWS.to_string());
        }
    }
}

#[test]
fn sqlite_with_a_writer_per_gateway_keeps_every_row_rollback_journal() {
    sqlite_two_writers("delete");
}

/// WAL with its index in each process's memory (`locking_mode=EXCLUSIVE`;
/// see `locks/sqlite_writer.py`). WAL's default shared-memory index (an
/// mmap of `-shm`) is not coherent between two kernels, on IMCa as on any
/// network file system: rows are lost, so that mode is not tested.
#[test]
fn sqlite_with_a_writer_per_gateway_keeps_every_row_wal_exclusive() {
    sqlite_two_writers("wal-exclusive");
}

/// `cargo nextest run -p imca --test fs_locks --run-ignored only bench_locks --no-capture`:
/// F_SETLK+F_UNLCK pairs and SQLite rows (rollback journal, transactions of
/// 10) per second through gateway 0 and in a local temporary directory, in
/// one run (docs/benchmarks/archive/issue-11-untar-locks-dir-ids.md).
#[test]
#[ignore]
fn bench_locks() {
    require_tool("python3", "python3");
    let c = ClusterSpec::new().gateways(2).start();
    let local = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/locks/bench.py");
    let run = |dir: &Path| {
        let out = Command::new("python3").arg(&script).arg(dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    for pass in 0..2 {
        fs::create_dir(c.path_at(0, &format!("p{pass}"))).unwrap();
        let imca = run(&c.path_at(0, &format!("p{pass}")));
        let dir = local.path().join(format!("p{pass}"));
        fs::create_dir(&dir).unwrap();
        let disk = run(&dir);
        println!("pass {pass}: locks/s, sqlite rows/s: imca {imca} | local {disk}");
    }
}
