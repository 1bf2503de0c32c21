//! `stats conns`, `watch` and `-B` against Debian's memcached 1.6.18: the
//! same sessions to both, replies compared byte for byte, or — where the
//! values are per server (fds, ports, timestamps, log ids) — line for line
//! with those values masked.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use cache_node::config::Binding;
use cache_node::Config;
use cache_proto::binary::{op, Request};
use common::memcached::{Memcached, MemcachedUnix};
use common::TestNode;

/// A TCP or UNIX stream, for sessions that run over either.
trait Conn: Read + Write {
    fn timeout(&self, t: Duration);
}
impl Conn for TcpStream {
    fn timeout(&self, t: Duration) {
        self.set_read_timeout(Some(t)).unwrap();
    }
}
impl Conn for UnixStream {
    fn timeout(&self, t: Duration) {
        self.set_read_timeout(Some(t)).unwrap();
    }
}

/// Where a server listens.
#[derive(Clone)]
enum At {
    Tcp(SocketAddr),
    Unix(std::path::PathBuf),
}

impl At {
    fn connect(&self) -> Box<dyn Conn> {
        match self {
            At::Tcp(a) => Box::new(TcpStream::connect(a).unwrap()),
            At::Unix(p) => Box::new(UnixStream::connect(p).unwrap()),
        }
    }
}

/// Reads until `until` ends what arrived, or the deadline passes.
fn read_until(s: &mut dyn Conn, until: &[u8]) -> Vec<u8> {
    s.timeout(Duration::from_millis(100));
    common::read_until_within(s, until, Duration::from_secs(10))
}

/// Reads what arrives until the peer has been quiet for a moment (for
/// replies that may be nothing at all).
fn read_quiet(s: &mut dyn Conn) -> Vec<u8> {
    s.timeout(Duration::from_millis(300));
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return [out, b"<closed>".to_vec()].concat(),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => return out,
        }
    }
}

/// `s` with every run of digits after one of `prefixes` replaced by `#`.
fn mask(s: &str, prefixes: &[&str]) -> String {
    let mut out = String::new();
    let mut rest = s;
    'outer: while !rest.is_empty() {
        for p in prefixes {
            if let Some(tail) = rest.strip_prefix(p) {
                out.push_str(p);
                let n = tail.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
                out.push('#');
                rest = &tail[n..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `stats conns` with an idle connection, one in the middle of a value and
/// the asking one: the lines memcached prints, fds renumbered in order and
/// ports and seconds masked.
fn conns_shape(at: &At) -> Vec<String> {
    let mut idle = at.connect();
    idle.write_all(b"get a\r\n").unwrap();
    assert_eq!(read_until(&mut *idle, b"END\r\n"), b"END\r\n");
    let mut nread = at.connect();
    nread.write_all(b"set x 0 0 10\r\nab").unwrap();
    let mut asker = at.connect();
    // the half-sent value is seen once the server has read it: ask until it is
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        asker.write_all(b"stats conns\r\n").unwrap();
        let text = String::from_utf8(read_until(&mut *asker, b"END\r\n")).unwrap();
        if text.contains("conn_nread") || Instant::now() > deadline {
            break text;
        }
    };
    let mut fds: Vec<String> = Vec::new();
    text.lines()
        .map(|l| {
            let Some(rest) = l.strip_prefix("STAT ") else { return l.to_string() };
            let (fd, rest) = rest.split_once(':').unwrap();
            if !fds.iter().any(|f| f == fd) {
                fds.push(fd.to_string());
            }
            let i = fds.iter().position(|f| f == fd).unwrap();
            // A connection whose reply was just read may still be shown
            // writing it, by either server: both are "waiting for a command".
            mask(&format!("STAT c{i}:{rest}"), &["127.0.0.1:", "secs_since_last_cmd "]).replace("conn_mwrite", "conn_read")
        })
        .collect()
}

#[test]
fn stats_conns_lists_connections_as_memcached_does() {
    let dir = tempfile::tempdir().unwrap();
    let (pm, pi) = (dir.path().join("mc.sock"), dir.path().join("imca.sock"));
    let mc = Memcached::start();
    let _mcu = MemcachedUnix::start(&pm, &[]);
    let node = TestNode::local();
    let _nodeu = TestNode::start(Config { unix_socket: Some(pi.clone()), ..Config::local() });
    for (want, got) in [(At::Tcp(mc.addr), At::Tcp(node.addr)), (At::Unix(pm), At::Unix(pi))] {
        let (want, got) = (conns_shape(&want), conns_shape(&got));
        let got: Vec<String> = got.iter().map(|l| l.replace("imca.sock", "mc.sock")).collect();
        assert!(want.iter().any(|l| l.contains("conn_nread")) && want.len() == 16, "memcached: {want:#?}");
        assert_eq!(got, want);
    }
}

/// One connection: each step's bytes, then what came back.
fn steps(at: &At, steps: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut s = at.connect();
    steps
        .iter()
        .map(|step| {
            s.write_all(step).unwrap();
            read_quiet(&mut *s)
        })
        .collect()
}

/// A watcher of `kinds`, its `OK` read.
fn watcher(at: &At, kinds: &str) -> Box<dyn Conn> {
    let mut w = at.connect();
    w.write_all(format!("watch {kinds}\r\n").as_bytes()).unwrap();
    assert_eq!(read_until(&mut *w, b"OK\r\n"), b"OK\r\n");
    w
}

/// `n` log lines from a watcher, masked: `ts`, `gid`, `cfd` and `rport`
/// differ per server; `ttl` by a second at most (the clock may tick), and
/// the (negative, wrapped) ttl of an already expired item by the seconds
/// each server has been up.
fn lines(w: &mut dyn Conn, n: usize) -> Vec<String> {
    let mut text = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while text.iter().filter(|b| **b == b'\n').count() < n && Instant::now() < deadline {
        text.extend(read_until(w, b"\n"));
    }
    String::from_utf8(text)
        .unwrap()
        .lines()
        .map(|l| {
            let l = mask(l, &["ts=", "gid=", "cfd=", "rport="]).replace("ttl=99 ", "ttl=100 ");
            if l.contains("ttl=42949672") { mask(&l, &["ttl="]) } else { l }
        })
        .collect()
}

#[test]
fn watch_streams_memcached_log_lines() {
    let mc = Memcached::start();
    let node = TestNode::local();
    let mut runs = Vec::new();
    for at in [At::Tcp(mc.addr), At::Tcp(node.addr)] {
        // refusals, byte for byte
        let refusals = steps(
            &at,
            &[
                b"watch bogus\r\n",
                b"set x 0 0 1 noreply\r\nx\r\nwatch\r\n",
                b"mg zz v q\r\nwatch\r\n",
                b"version\r\nwatch\r\n",
                b"watch fetchers noreply\r\nversion\r\n",
                b"watch fetchers bogus\r\n",
                b"set y 0 0 1\r\nx\r\nget x\r\nmn\r\nwatch\r\nget y\r\n",
                b"get y\r\n",
            ],
        );
        // fetchers and mutations
        let mut w = watcher(&at, "fetchers mutations");
        let mut o = at.connect();
        o.write_all(b"set k1 0 0 3\r\nabc\r\nget k1 nope\r\nadd k1 0 100 2\r\nxy\r\nmg k1 v\r\nappend zz 0 0 1\r\nx\r\nms k%2F 2 T100\r\nhi\r\nmn\r\n").unwrap();
        read_until(&mut *o, b"MN\r\n");
        // an item mg vivifies (not found, then found) and one stored expired
        o.write_all(b"mg nv N30 v t\r\nmg nv v\r\nset ex 0 -1 2\r\nhi\r\nget ex\r\nmn\r\n").unwrap();
        read_until(&mut *o, b"MN\r\n");
        let data = lines(&mut *w, 16);
        // a binary get and set
        let mut b = at.connect();
        b.write_all(&[Request::encode(op::SET, &[0u8; 8], b"bk", b"v", 1, 0), Request::encode(op::GET, &[], b"bk", &[], 2, 0)].concat())
            .unwrap();
        let bin = lines(&mut *w, 3);
        // a watcher of fetchers only does not see mutations
        let mut f = watcher(&at, "");
        o.write_all(b"set k2 0 0 1\r\nz\r\nget k2\r\n").unwrap();
        let only_get = lines(&mut *f, 2);
        // connection events of one client
        let mut c = watcher(&at, "connevents");
        let mut q = at.connect();
        q.write_all(b"quit\r\n").unwrap();
        let _ = read_quiet(&mut *q);
        let conn = lines(&mut *c, 2);
        runs.push((refusals, data, bin, only_get, conn));
    }
    let (got, want) = (runs.pop().unwrap(), runs.pop().unwrap());
    assert_eq!(want.1.len(), 16, "memcached: {:#?}", want.1);
    assert_eq!(got.0, want.0, "refusals");
    assert_eq!(got.1, want.1, "fetchers and mutations");
    assert_eq!(got.2, want.2, "binary");
    assert_eq!(got.3, want.3, "fetchers only");
    assert_eq!(got.4, want.4, "connevents");
}

/// Eviction lines: the same fields as memcached's (what is evicted first
/// differs: memcached's LRU is segmented per slab class).
#[test]
fn watch_evictions_has_memcached_fields() {
    let mc = Memcached::with(&["-m", "2"]);
    let node = TestNode::start(Config { memory_bytes: 2 << 20, ..Config::local() });
    let mut shapes = Vec::new();
    for at in [At::Tcp(mc.addr), At::Tcp(node.addr)] {
        let mut w = watcher(&at, "evictions");
        let mut o = at.connect();
        let v = vec![b'v'; 100_000];
        for i in 0..60 {
            o.write_all(format!("set e{i} 0 0 {}\r\n", v.len()).as_bytes()).unwrap();
            o.write_all(&v).unwrap();
            o.write_all(b"\r\n").unwrap();
            assert_eq!(read_until(&mut *o, b"\r\n"), b"STORED\r\n");
        }
        let first = lines(&mut *w, 1).remove(0);
        // every value masked: the field names and their order remain
        let shape: Vec<String> = first.split(' ').map(|kv| kv.split_once('=').map_or(kv.into(), |(k, _)| format!("{k}="))).collect();
        assert!(first.contains(" fetch=no ttl=-1 ") && first.contains(" size=100000"), "{first}");
        shapes.push(shape);
    }
    assert_eq!(shapes[1], shapes[0]);
}

/// Sends a session, half-closes, reads until the server closes.
fn session(at: &At, req: &[u8]) -> Vec<u8> {
    let mut s = match at {
        At::Tcp(a) => TcpStream::connect(a).unwrap(),
        At::Unix(_) => unreachable!(),
    };
    s.write_all(req).unwrap();
    let _ = s.shutdown(Shutdown::Write);
    read_until(&mut s, b"\x00never\x00")
}

/// `-B ascii` / `-B binary`: what each refuses, and how.
#[test]
fn bound_protocols_match_memcached() {
    let bin_get = Request::encode(op::GET, &[], b"k", &[], 7, 0);
    let bin_set = Request::encode(op::SET, &[0u8; 8], b"k", b"val", 1, 0);
    for (flag, binding) in [("ascii", Binding::Ascii), ("binary", Binding::Binary)] {
        let mc = Memcached::with(&["-B", flag]);
        let node = TestNode::start(Config { binding, ..Config::local() });
        let sessions: Vec<Vec<u8>> = vec![
            b"set a 0 0 1\r\nx\r\nget a\r\nmn\r\n".to_vec(),
            [bin_set.clone(), bin_get.clone()].concat(),
            [&bin_get[..], b"\r\nversion\r\n"].concat(),
            b"get a\r\nget b\r\nget c\r\nget d\r\n".to_vec(),
            b"stats settings\r\n".to_vec(),
        ];
        for req in &sessions {
            let (want, got) = (session(&At::Tcp(mc.addr), req), session(&At::Tcp(node.addr), req));
            if req.starts_with(b"stats") {
                let line = |r: &[u8]| String::from_utf8_lossy(r).lines().find(|l| l.contains("binding_protocol")).map(String::from);
                assert_eq!(line(&got), line(&want), "-B {flag}");
                continue;
            }
            // CAS values are per server
            let norm = |mut r: Vec<u8>| {
                if r.first() == Some(&0x81) && r.len() >= 24 {
                    r[16..24].fill(0);
                }
                r
            };
            assert_eq!(norm(got), norm(want), "-B {flag}: {:?}", String::from_utf8_lossy(req));
        }
    }
}
