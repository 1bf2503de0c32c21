//! Idle sockets against a node with logins (`-Y`), tried as issue 32 found
//! them: 1,024 sockets that never log in filled `-c` ("Too many open
//! connections") and every gateway started after them ran without the bank.
//! Now whatever has not logged in is capped, shed oldest first and closed
//! at the login timeout, so a client that logs in always gets in.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_until, start_with_args, stats};

const IDLE: usize = 1_100;

fn auth_file(dir: &tempfile::TempDir) -> String {
    let file = dir.path().join("auth");
    std::fs::write(&file, "volume:s3cret\n").unwrap();
    file.to_str().unwrap().to_string()
}

/// Logs in on a fresh connection and stores and reads a value through it.
fn log_in_and_use(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"set login 0 0 13\r\nvolume s3cret\r\n").unwrap();
    let r = read_until(&mut s, b"\r\n");
    assert_eq!(String::from_utf8_lossy(&r), "STORED\r\n", "the login was not answered");
    s.write_all(b"set k 0 0 5\r\nhello\r\nget k\r\n").unwrap();
    let r = read_until(&mut s, b"END\r\n");
    assert_eq!(String::from_utf8_lossy(&r), "STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n");
    s
}

/// Whether the node has closed `s` (EOF or reset), waiting up to `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut b = [0u8; 64];
    while let Some(left) = end.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn idle_sockets_never_keep_a_client_that_logs_in_out() {
    let dir = tempfile::tempdir().unwrap();
    let login_timeout = Duration::from_secs(2);
    let node = start_with_args(&["-Y", &auth_file(&dir), "--login-timeout", "2"]);
    assert_eq!(node.node.config.max_conns, 1024, "the default -c");

    let t0 = Instant::now();
    let mut idle: Vec<TcpStream> = (0..IDLE).map(|_| TcpStream::connect(node.addr).expect("connect")).collect();
    // Connected after all of them (the backlog is first in, first out): it
    // is the newest, logs in at once, and gets in.
    let mut client = log_in_and_use(node.addr);
    let t1 = Instant::now();
    println!("{IDLE} idle sockets in {:?}; a client logged in after them", t1 - t0);
    // Another client still gets in while they are held.
    drop(log_in_and_use(node.addr));

    // The ones not shed are closed at the login timeout; logged-in ones stay.
    for (i, s) in idle.iter_mut().enumerate() {
        // those left when the client logged in were accepted before it
        let left = (login_timeout + Duration::from_secs(2)).saturating_sub(t1.elapsed());
        assert!(closed_within(s, left), "idle socket {i} still open {:?} after the flood", t1.elapsed());
    }
    println!("every idle socket closed {:?} after the flood", t1.elapsed());
    client.write_all(b"get k\r\n").unwrap();
    assert_eq!(read_until(&mut client, b"END\r\n"), b"VALUE k 0 5\r\nhello\r\nEND\r\n", "a logged-in client was closed");

    // Counted: memcached's rejected_connections (nothing was refused: idle
    // ones were shed instead) and ours.
    let st = stats(&mut client, "");
    let n = |k: &str| st.get(k).unwrap_or_else(|| panic!("no stat {k}")).parse::<u64>().unwrap();
    println!("rejected {} shed {} timed out {}", n("rejected_connections"), n("login_shed_connections"), n("login_timeouts"));
    assert_eq!(n("rejected_connections"), 0);
    let cap = (1024 / cache_node::config::LOGIN_CONNS_SHARE) as u64;
    assert!(n("login_shed_connections") >= IDLE as u64 - cap, "{st:?}");
    assert!(n("login_timeouts") >= 1 && n("login_timeouts") <= cap, "{st:?}");
    assert_eq!(n("login_shed_connections") + n("login_timeouts"), IDLE as u64);
    // the shed ones' tasks end as their workers get to them
    let t = Instant::now();
    while stats(&mut client, "")["curr_connections"] != "1" {
        assert!(t.elapsed() < Duration::from_secs(5), "connections still counted as open");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_socket_that_does_not_log_in_is_closed_at_the_login_timeout_and_one_that_does_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_with_args(&["-Y", &auth_file(&dir), "--login-timeout", "1"]);
    let t0 = Instant::now();
    let mut silent = TcpStream::connect(node.addr).unwrap();
    // sends something, but never the login
    let mut chatty = TcpStream::connect(node.addr).unwrap();
    chatty.write_all(b"get k\r\n").unwrap();
    assert_eq!(read_until(&mut chatty, b"\r\n"), b"CLIENT_ERROR unauthenticated\r\n");
    let mut client = log_in_and_use(node.addr);
    assert!(closed_within(&mut silent, Duration::from_secs(4)));
    assert!(closed_within(&mut chatty, Duration::from_secs(1)));
    let cut = t0.elapsed();
    assert!(cut >= Duration::from_millis(900) && cut < Duration::from_secs(3), "closed after {cut:?}");
    client.write_all(b"get k\r\n").unwrap();
    assert_eq!(read_until(&mut client, b"END\r\n"), b"VALUE k 0 5\r\nhello\r\nEND\r\n");
}

/// Without `-Y` nothing can be told apart: memcached's `-c` applies as it
/// always did (refusal, not shedding), and a per-peer cap only when asked.
#[test]
fn without_logins_memcacheds_limit_applies_and_a_peer_cap_only_if_asked() {
    let node = start_with_args(&["-c", "4"]);
    let held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(node.addr).unwrap()).collect();
    let mut over = TcpStream::connect(node.addr).unwrap();
    assert_eq!(read_until(&mut over, b"\r\n"), b"ERROR Too many open connections\r\n");
    drop(held);

    let node = start_with_args(&["--peer-conn-limit", "2"]);
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(node.addr).unwrap()).collect();
    let mut over = TcpStream::connect(node.addr).unwrap();
    assert_eq!(read_until(&mut over, b"\r\n"), b"ERROR Too many open connections\r\n");
    let mut first = &held[0];
    first.write_all(b"version\r\n").unwrap();
    let mut first = held.into_iter().next().unwrap();
    assert!(read_until(&mut first, b"\r\n").starts_with(b"VERSION "), "a held connection was cut");
    assert_eq!(stats(&mut first, "")["rejected_connections"], "1");
}

/// The same from another local user (uid 1001) whose sockets come back as
/// fast as they are closed: they shed each other (the flooder's are the
/// most, so the oldest of its own go), and a client that logs in, again and
/// again, is answered at once.
#[test]
fn another_users_churning_sockets_never_keep_a_client_that_logs_in_out() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run the attacker as uid 1001");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let node = start_with_args(&["-Y", &auth_file(&dir), "--login-timeout", "2"]);
    // it trickles an HTTP head that never ends; to a node, junk lines
    let source = include_str!("../../admin/tests/attack/trickle.py");
    let mut attacker = Command::new("python3")
        .arg("-c")
        .arg(source)
        .arg(node.addr.to_string())
        .arg(IDLE.to_string())
        .uid(1001)
        .gid(1001)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = std::io::BufReader::new(attacker.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the attacker did not start");
    let t0 = Instant::now();
    let (mut slowest, mut logins) = (Duration::ZERO, 0);
    while t0.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        drop(log_in_and_use(node.addr));
        slowest = slowest.max(t.elapsed());
        logins += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(attacker.stdin.take());
    line.clear();
    out.read_line(&mut line).unwrap();
    let _ = attacker.wait();
    println!("{logins} logins, slowest {slowest:?}; the attacker: {line}");
    let counts: serde_json::Value = serde_json::from_str(&line).expect("the attacker's counts");
    assert_eq!(counts["uid"], 1001);
    assert!(counts["closed_by_server"].as_u64().unwrap() > IDLE as u64, "the flood was not shed: {counts}");
    // What a login can wait for: its turn in the accept queue, behind the
    // flooder's reconnects (each accepted and shed in turn; tens of
    // microseconds each in a release build). Before, it never got in.
    assert!(slowest < Duration::from_secs(2), "a login waited {slowest:?}");
}
