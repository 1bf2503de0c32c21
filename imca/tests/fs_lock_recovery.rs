//! Locks across a restart of the storage servers: a restarted server opens
//! a grace in which the gateways reclaim what their owners hold, so a lock
//! held through one gateway still excludes the other afterwards; a lock that
//! could not be reclaimed is reported to its holder (EIO on its next lock
//! call), never silently given away.

mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The servers' grace in these tests (the default is longer).
const GRACE: &str = "4";
/// Long enough for a busy machine.
const DEADLINE: Duration = Duration::from_secs(20);

fn open_rw(p: &Path) -> File {
    OpenOptions::new().read(true).write(true).open(p).unwrap()
}

/// fcntl(F_SETLK) of one range.
fn setlk(f: &File, typ: i32, start: i64, len: i64) -> std::io::Result<()> {
    // SAFETY: plain old data; every field is set or zero.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = typ as i16;
    l.l_whence = libc::SEEK_SET as i16;
    l.l_start = start;
    l.l_len = len;
    // SAFETY: a valid fd and a valid struct flock.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &l) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The value of an unlabelled metric (or the sum of a labelled one's series
/// that carry `label`).
fn metric(d: &Daemon, name: &str, label: &str) -> f64 {
    http_get(&d.metrics_url().expect("metrics"))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && rest.contains(label)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "{what}: not after {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Which server orders `rel`'s locks (`stripe::layout::ordering_server`).
fn ordering_server(c: &Cluster, rel: &str) -> usize {
    let fid = u128::from_str_radix(&fid_of(&c.export(0).join(rel)), 16).expect("a hex file id");
    (fid % c.storage.len() as u128) as usize
}

#[test]
fn a_lock_held_across_each_servers_restart_still_excludes_the_other_gateway() {
    let mut c = ClusterSpec::new().gateways(2).storage_arg("--lock-grace").storage_arg(GRACE).start();
    fs::write(c.path_at(0, "f"), vec![0u8; 100]).unwrap();
    let a = open_rw(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));
    setlk(&a, libc::F_WRLCK, 0, 0).unwrap();
    assert_errno(setlk(&b, libc::F_WRLCK, 0, 1), libc::EAGAIN);
    let orderer = ordering_server(&c, "f");
    // The other server first, then the file's own (whose lock table restarts empty).
    for s in [1 - orderer, orderer] {
        c.storage[s].restart();
        assert_errno(setlk(&b, libc::F_WRLCK, 0, 1), libc::EAGAIN);
        assert_errno(setlk(&b, libc::F_RDLCK, 50, 1), libc::EAGAIN);
        wait_for("the grace ends", || metric(&c.storage[s], "imca_storage_lock_grace", "") == 0.0);
        assert_errno(setlk(&b, libc::F_WRLCK, 0, 1), libc::EAGAIN);
        assert_errno(setlk(&b, libc::F_RDLCK, 99, 1), libc::EAGAIN);
    }
    let reclaimed = metric(&c.storage[orderer], "imca_storage_lock_reclaims_total", "outcome=\"granted\"");
    assert_eq!(reclaimed, 1.0, "gateway 0 asked its lock back");
    assert_eq!(metric(&c.gateways[0].daemon, "imca_gateway_locks_lost_total", ""), 0.0);
    // The holder is the holder still: it unlocks, and then the other gateway gets it.
    setlk(&a, libc::F_UNLCK, 0, 0).unwrap();
    setlk(&b, libc::F_WRLCK, 0, 1).unwrap();
    assert_errno(setlk(&a, libc::F_WRLCK, 0, 1), libc::EAGAIN);
}

/// A process holding locks on a file through a mount (`locks/holder.py`).
struct Holder {
    child: std::process::Child,
    answers: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Holder {
    fn start(path: &Path) -> Holder {
        require_tool("python3", "python3");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/locks/holder.py");
        let mut child = Command::new("python3").arg(script).arg(path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut answers = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(answers.next().unwrap().unwrap(), "ready");
        Holder { child, answers }
    }

    /// "ok" or the errno's name.
    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.child.stdin.as_mut().unwrap(), "{cmd}").unwrap();
        self.answers.next().expect("an answer").unwrap()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_lock_that_could_not_be_reclaimed_fails_its_holders_next_lock_call() {
    let mut c = ClusterSpec::new().gateways(2).storage_arg("--lock-grace").storage_arg("1").start();
    fs::write(c.path_at(0, "f"), b"x").unwrap();
    // The holder is a process of its own: while gateway 0 is frozen, the
    // test process starts a server, which must not close a descriptor of
    // gateway 0's mount on its way to exec.
    let mut a = Holder::start(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));
    assert_eq!(a.ask("lock 0 0"), "ok");
    assert_errno(setlk(&b, libc::F_WRLCK, 0, 0), libc::EAGAIN);
    // Gateway 0 is frozen over the restart and the whole grace: it cannot
    // reclaim in time, and gateway 1 is granted the lock after the grace.
    let orderer = ordering_server(&c, "f");
    c.gateways[0].daemon.signal(libc::SIGSTOP);
    c.storage[orderer].restart();
    wait_for("the grace ends", || metric(&c.storage[orderer], "imca_storage_lock_grace", "") == 0.0);
    setlk(&b, libc::F_WRLCK, 0, 0).unwrap();
    c.gateways[0].daemon.signal(libc::SIGCONT);
    wait_for("gateway 0 finds its lock lost", || metric(&c.gateways[0].daemon, "imca_gateway_locks_lost_total", "") == 1.0);
    assert!(c.gateways[0].daemon.log_tail(50).contains("could not be reclaimed"));
    // The holder is told, once, at its next lock call on the file...
    assert_eq!(a.ask("lock 0 0"), "EIO");
    // ...and then asks as anyone would.
    assert_eq!(a.ask("lock 0 0"), "EAGAIN");
    setlk(&b, libc::F_UNLCK, 0, 0).unwrap();
    assert_eq!(a.ask("lock 0 0"), "ok");
}

/// Not a restart: the holder's gateway is frozen past its lease, so the
/// server gives its lock to a waiter (as NFSv4 does past a lease). The
/// holder is told when its gateway wakes, not left believing it holds it.
#[test]
fn a_lock_dropped_while_its_gateway_was_frozen_fails_its_holders_next_lock_call() {
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "f"), b"x").unwrap();
    let mut a = Holder::start(&c.path_at(0, "f"));
    let b = open_rw(&c.path_at(1, "f"));
    assert_eq!(a.ask("lock 0 0"), "ok");
    c.gateways[0].daemon.signal(libc::SIGSTOP);
    wait_for("gateway 1 is granted the frozen gateway's lock", || setlk(&b, libc::F_WRLCK, 0, 0).is_ok());
    c.gateways[0].daemon.signal(libc::SIGCONT);
    wait_for("gateway 0 finds its lock lost", || metric(&c.gateways[0].daemon, "imca_gateway_locks_lost_total", "") == 1.0);
    assert_eq!(a.ask("lock 0 0"), "EIO");
    assert_eq!(a.ask("lock 0 0"), "EAGAIN");
}
