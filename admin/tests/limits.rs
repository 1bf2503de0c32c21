//! What a client can make the admin server hold, tried as an attacker
//! would over raw TCP: thousands of idle connections, a head sent one
//! header at a time (slowloris), bodies too large or too slow, a huge head,
//! a connection kept forever. Each is capped, cut or refused, and the server
//! keeps serving.

mod common;

use admin::client::{parse_response, Client};
use admin::{Auth, ServerLimits};
use common::Fake;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "s3cret";

/// A server on 127.0.0.1:0 under `limits`, on its own runtime thread (the
/// test's side is blocking sockets).
fn start(limits: ServerLimits) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    l.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(l).unwrap();
            let backend = Arc::new(Fake::default());
            admin::serve_with(l, backend, Auth::with_token(TOKEN), limits, std::future::pending()).await.unwrap();
        });
    });
    addr
}

/// Everything the server sends on `s` until it closes the connection (EOF
/// or reset: bytes that arrived before a reset are kept) or `within` passes.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let end = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (got, false);
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return (got, false),
            Err(_) => return (got, true),
        }
    }
}

fn status_of(reply: &[u8]) -> u16 {
    parse_response(reply).map(|r| r.status).unwrap_or(0)
}

/// Send `raw` on a fresh connection and return the status of the reply.
fn raw_status(addr: SocketAddr, raw: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(raw).unwrap();
    let (reply, _) = read_until_closed(&mut s, Duration::from_secs(10));
    status_of(&reply)
}

fn healthy(addr: SocketAddr) -> bool {
    Client::new(&addr.to_string(), None).unwrap().request("GET", "/healthz", None).is_ok_and(|r| r.status == 200)
}

/// Connections the server still holds open: nothing sent to them yet, not
/// closed (a refused one has its 503 waiting, or is closed).
fn still_open(conns: &[TcpStream]) -> usize {
    let mut b = [0u8; 1];
    conns
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            let open = matches!(s.peek(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock);
            s.set_nonblocking(false).unwrap();
            open
        })
        .count()
}

#[test]
fn idle_connections_are_capped_then_closed_and_their_slots_come_back() {
    const CAP: usize = 16;
    const FLOOD: usize = 2_000;
    let timeout = Duration::from_secs(2);
    let addr = start(ServerLimits { max_connections: CAP, header_timeout: timeout, ..Default::default() });
    assert!(healthy(addr));

    let t0 = Instant::now();
    let mut idle: Vec<TcpStream> = (0..FLOOD).map(|_| TcpStream::connect(addr).expect("connect")).collect();
    let connected = t0.elapsed();
    // Once a request made after the flood is answered, the server has
    // accepted every flood connection (the backlog is FIFO); any still
    // open then holds one of the slots.
    let r = Client::new(&addr.to_string(), None).unwrap().request("GET", "/healthz", None).unwrap();
    let open = still_open(&idle);
    println!("{FLOOD} idle connections made in {connected:?}; a request after them: {}; open then: {open}", r.status);
    assert!(open <= CAP, "{open} idle connections held at once, cap {CAP}");
    // The newcomer took an idle one's place (idle ones are shed, oldest
    // first) instead of being refused.
    assert_eq!(r.status, 200, "{}", r.text());

    for s in &mut idle {
        let (_, closed) = read_until_closed(s, timeout * 3);
        assert!(closed, "an idle connection was still open {:?} after the flood began", t0.elapsed());
    }
    println!("all idle connections shed or closed by the header timeout after {:?}", t0.elapsed());
    drop(idle);
    // The slots came back.
    let t = Instant::now();
    while !healthy(addr) {
        assert!(t.elapsed() < Duration::from_secs(5), "the server did not recover after the flood");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 32: 64 trickling connections kept everyone out (503) for as long
/// as they came. Now another local user's connections, however many and
/// however fast they come back, hold that user's share only, and the token
/// holder is answered at once.
#[test]
fn another_users_trickling_connections_never_keep_the_token_holder_out() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run the attacker as uid 1001");
        return;
    }
    const ATTACKER: u32 = 1001;
    const TRICKLING: usize = 100;
    let limits = ServerLimits::default();
    assert!(TRICKLING > limits.max_connections);
    let addr = start(limits);
    let source = include_str!("attack/trickle.py");
    let mut helper = Command::new("python3")
        .arg("-c")
        .arg(source)
        .arg(addr.to_string())
        .arg(TRICKLING.to_string())
        .uid(ATTACKER)
        .gid(ATTACKER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = std::io::BufReader::new(helper.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the attacker did not start");

    // Long enough to span a header timeout: the trickles come and go all along.
    let admin = Client::new(&addr.to_string(), Some(TOKEN.into())).unwrap();
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut asked = 0;
    while t0.elapsed() < limits.header_timeout + Duration::from_secs(1) {
        let t = Instant::now();
        let r = admin.request("GET", "/api/v1/status", None).unwrap();
        assert_eq!(r.status, 200, "the token holder was refused while uid {ATTACKER} trickled: {}", r.text());
        let body = r#"{"block_size":4096}"#;
        let r = admin.request("PUT", "/api/v1/config", Some(body.as_bytes())).unwrap();
        assert_eq!(r.status, 200, "a change was refused while uid {ATTACKER} trickled: {}", r.text());
        slowest = slowest.max(t.elapsed());
        asked += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(helper.stdin.take());
    line.clear();
    out.read_line(&mut line).unwrap();
    let _ = helper.wait();
    println!("{asked} status reads and changes with the token, slowest pair {slowest:?}; the attacker: {line}");
    let counts: serde_json::Value = serde_json::from_str(&line).expect("the attacker's counts");
    assert_eq!(counts["uid"], ATTACKER);
    assert!(counts["connects"].as_u64().unwrap() > TRICKLING as u64, "the trickles did not come back: {counts}");
    assert!(slowest < Duration::from_secs(1), "the token holder waited {slowest:?}");
}

#[test]
fn a_slowloris_head_is_cut_after_the_header_timeout() {
    let timeout = Duration::from_secs(1);
    let addr = start(ServerLimits { header_timeout: timeout, ..Default::default() });
    let mut s = TcpStream::connect(addr).unwrap();
    let t0 = Instant::now();
    s.write_all(b"GET /api/v1/status HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut closed = false;
    for i in 0.. {
        // one more header every 100 ms: the head never ends
        if s.write_all(format!("X-Slow-{i}: y\r\n").as_bytes()).is_err() {
            closed = true;
            break;
        }
        let (_, c) = read_until_closed(&mut s, Duration::from_millis(100));
        if c {
            closed = true;
            break;
        }
        if t0.elapsed() > timeout * 5 {
            break;
        }
    }
    let cut = t0.elapsed();
    println!("slowloris head cut after {cut:?} (header timeout {timeout:?})");
    assert!(closed, "a head trickled for {cut:?} was never cut");
    assert!(cut >= timeout - Duration::from_millis(100) && cut < timeout * 4, "cut after {cut:?}");
    assert!(healthy(addr));
}

#[test]
fn bodies_too_large_or_too_slow_and_huge_heads_are_refused() {
    let limits = ServerLimits { body_timeout: Duration::from_secs(1), ..Default::default() };
    let max = limits.max_body_bytes;
    let addr = start(limits);
    let put = |auth: bool, extra: &str| {
        let a = if auth { format!("Authorization: Bearer {TOKEN}\r\n") } else { String::new() };
        format!("PUT /api/v1/config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{a}Content-Type: application/json\r\n{extra}\r\n")
    };

    // Declared too large: 413 before a byte of it is read.
    let t = Instant::now();
    assert_eq!(raw_status(addr, put(true, &format!("Content-Length: {}\r\n", max + 1)).as_bytes()), 413);
    assert!(t.elapsed() < Duration::from_secs(1), "413 waited for the body");
    // Without the token the body is not even looked at.
    assert_eq!(raw_status(addr, put(false, "Content-Length: 100000000\r\n").as_bytes()), 401);

    // Chunked, growing past the limit: 413 once it does.
    let mut req = put(true, "Transfer-Encoding: chunked\r\n").into_bytes();
    for _ in 0..(max / 4096 + 1) {
        req.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
        req.extend(std::iter::repeat_n(b' ', 4096));
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(raw_status(addr, &req), 413);

    // A body that stops coming: 408 after the body timeout.
    let mut s = TcpStream::connect(addr).unwrap();
    let t = Instant::now();
    s.write_all(put(true, "Content-Length: 40\r\n").as_bytes()).unwrap();
    s.write_all(b"{\"block_size\":").unwrap();
    let (reply, _) = read_until_closed(&mut s, Duration::from_secs(10));
    let waited = t.elapsed();
    assert_eq!(status_of(&reply), 408, "{}", String::from_utf8_lossy(&reply));
    assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "408 after {waited:?}");

    // A head larger than the limit: 431.
    let huge = format!("GET /api/v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n", "a".repeat(64 << 10));
    assert_eq!(raw_status(addr, huge.as_bytes()), 431);

    // And a real change still goes through.
    let body = r#"{"block_size":4096}"#;
    let ok = format!("{}{body}", put(true, &format!("Content-Length: {}\r\n", body.len())));
    assert_eq!(raw_status(addr, ok.as_bytes()), 200);
}

#[test]
fn a_connection_past_its_age_is_closed_between_requests() {
    let age = Duration::from_secs(1);
    let addr = start(ServerLimits { max_connection_age: age, ..Default::default() });
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t0 = Instant::now();
    let mut answered = 0;
    // A kept-alive client asking again and again: every request it gets an
    // answer to is answered whole; the connection ends between two.
    let closed_after = loop {
        assert!(t0.elapsed() < age * 5, "still open after {:?}", t0.elapsed());
        if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").is_err() {
            break t0.elapsed();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        let whole = loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            if got.ends_with(b"\r\n\r\nok\n") {
                break true;
            }
        };
        if !whole {
            assert!(got.is_empty(), "a reply was cut: {}", String::from_utf8_lossy(&got));
            break t0.elapsed();
        }
        answered += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("{answered} requests answered; closed after {closed_after:?} (age {age:?})");
    assert!(closed_after >= age && answered > 3, "closed after {closed_after:?}, {answered} answered");
}
