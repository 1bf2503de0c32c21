//! `imca cache-node` as operators run it: memcached's flags, the ready file,
//! a real memcached client, /metrics, and a clean exit on SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use testkit_procs::Memcached;
use std::time::{Duration, Instant};

#[test]
fn cache_node_binary_serves_memcached_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-p", "0", "-l", "127.0.0.1", "-m", "8", "-c", "64", "-t", "2", "-I", "2m", "-U", "0", "-v"])
        .args(["--metrics", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start imca cache-node");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        assert!(child.try_wait().unwrap().is_none(), "imca cache-node exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    let info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let addr = info["addr"].as_str().unwrap().to_string();
    let metrics = info["metrics"].as_str().unwrap().trim_start_matches("http://").trim_end_matches("/metrics").to_string();

    let c = memcache::Client::connect(format!("memcache://{addr}")).unwrap();
    let value = vec![7u8; 1_500_000]; // over 1 MiB: allowed by -I 2m
    c.set("big", &value[..], 0).unwrap();
    assert_eq!(c.get::<Vec<u8>>("big").unwrap().unwrap(), value);
    let settings = c.stats().unwrap();
    assert!(!settings.is_empty());

    let mut s = TcpStream::connect(&metrics).unwrap();
    s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.contains("imca_cache_node_ops_total{op=\"get\",result=\"hit\"} 1"), "{body}");

    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "did not exit on SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "exit status {status}");
    assert!(TcpStream::connect(&addr).is_err());
}

/// Like Debian's memcached.conf: without `-l` a node is reachable from this
/// host only (memcached's protocol has no authentication), and `--help` says so.
#[test]
fn cache_node_listens_on_loopback_by_default() {
    let help = Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 127.0.0.1]") && help.contains("loopback"), "{help}");

    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-p", "0", "-m", "8", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start imca cache-node");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        assert!(child.try_wait().unwrap().is_none(), "imca cache-node exited early");
        std::thread::sleep(Duration::from_millis(10));
    }
    let info: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    let addr = info["addr"].as_str().unwrap().to_string();
    let _ = child.kill();
    let _ = child.wait();
    assert!(addr.starts_with("127.0.0.1:"), "bound to {addr}");
}

/// Command lines memcached refuses at start are refused alike: the same exit
/// status and message (init scripts and config management check both).
#[test]
fn bad_command_lines_fail_like_memcached() {
    common_require_memcached();
    let cases: &[&[&str]] = &[
        &["-m", "1"],
        &["-I", "1000"],
        &["-m", "64", "-I", "33m"],
        &["-c", "0"],
        &["-t", "0"],
        &["-f", "1"],
        &["-n", "0"],
        &["-R", "0"],
        &["-o", "bogus_opt"],
        &["-o", "modern,hashpower=70"],
        &["-o", "hashpower=abc"],
        &["-B", "bogus"],
        &["-Y", "/nonexistent", "-B", "binary"],
    ];
    for argv in cases {
        let mc = Command::new("memcached").args(["-p", "0", "-U", "0", "-u", "root"]).args(*argv).output().unwrap();
        let us = Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "-p", "0"]).args(*argv).output().unwrap();
        assert_eq!(us.status.code(), mc.status.code(), "{argv:?}: exit status");
        let want = String::from_utf8_lossy(&mc.stderr).trim().to_string();
        let got = String::from_utf8_lossy(&us.stderr);
        assert!(!want.is_empty() && got.contains(&want), "{argv:?}: memcached says {want:?}, imca says {got:?}");
    }
}

/// -F: flush_all is refused as memcached refuses it (text and binary), and
/// `stats settings` says so.
#[test]
fn disable_flush_all_matches_memcached() {
    use std::io::{Read, Write};
    common_require_memcached();
    let port = |p: u16| format!("127.0.0.1:{p}");
    let mc = Memcached::with(&["-F"]);
    let us = Memcached::cache_node(Path::new(env!("CARGO_BIN_EXE_imca")), &["-F"]);
    let (pm, pi) = (mc.port(), us.port());
    let session = |addr: &str, req: &[u8]| {
        let mut s = connect(addr);
        s.write_all(req).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        out
    };
    let flush_bin: &[u8] = &[0x80, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0, 0, 0, 0, 0, 0, 0, 0];
    for req in [&b"flush_all\r\nflush_all 10\r\nflush_all noreply\r\nmn\r\n"[..], flush_bin] {
        assert_eq!(session(&port(pi), req), session(&port(pm), req), "{req:?}");
    }
    let settings = String::from_utf8(session(&port(pi), b"stats settings\r\n")).unwrap();
    assert!(settings.contains("STAT flush_enabled no"), "{settings}");
}

/// -M: when memory runs out a store is refused with memcached's error
/// (text and binary) and nothing is evicted; what was stored stays.
#[test]
fn disable_evictions_refuses_stores_like_memcached() {
    use std::io::{Read, Write};
    common_require_memcached();
    let free = testkit_procs::free_port;
    let (pm, pi) = (free(), free());
    let mut mc = Command::new("memcached")
        .args(["-l", "127.0.0.1", "-U", "0", "-u", "root", "-M", "-m", "2", "-p", &pm.to_string()])
        .spawn()
        .unwrap();
    let mut us =
        Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "-l", "127.0.0.1", "-M", "-m", "2", "-p", &pi.to_string()]).spawn().unwrap();
    let connect = |p: u16| connect(&format!("127.0.0.1:{p}"));
    // one request, one reply line (or one binary header + body)
    let ask = |s: &mut std::net::TcpStream, req: &[u8], binary: bool| -> Vec<u8> {
        s.write_all(req).unwrap();
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        loop {
            s.read_exact(&mut b).unwrap();
            out.push(b[0]);
            if !binary && out.ends_with(b"\r\n") {
                return out;
            }
            if binary && out.len() >= 24 {
                let body = u32::from_be_bytes([out[8], out[9], out[10], out[11]]) as usize;
                if out.len() == 24 + body {
                    return out;
                }
            }
        }
    };
    let value = vec![b'v'; 100_000];
    let mut outcome = Vec::new();
    for port in [pm, pi] {
        let mut s = connect(port);
        let mut replies = Vec::new();
        for i in 0..60 {
            let mut req = format!("set k{i} 0 0 {}\r\n", value.len()).into_bytes();
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
            replies.push(ask(&mut s, &req, false));
        }
        let stored: Vec<usize> = (0..60).filter(|i| replies[*i] == b"STORED\r\n").collect();
        let refused = replies.iter().filter(|r| *r == b"SERVER_ERROR out of memory storing object\r\n").count();
        assert_eq!(stored.len() + refused, 60, "port {port}: only STORED or out of memory: {replies:?}");
        assert!(!stored.is_empty() && refused > 0, "port {port}: {} stored, {refused} refused", stored.len());
        // nothing was evicted: every stored key is still there
        for i in &stored {
            let r = ask(&mut s, format!("mg k{i}\r\n").as_bytes(), false);
            assert_eq!(r, b"HD\r\n", "port {port}: k{i} was evicted");
        }
        // a binary set that cannot fit
        let mut bin = vec![0x80, 0x01, 0, 3, 8, 0, 0, 0];
        bin.extend_from_slice(&((8 + 3 + value.len()) as u32).to_be_bytes());
        bin.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        bin.extend_from_slice(b"bin");
        bin.extend_from_slice(&value);
        let mut b = connect(port);
        outcome.push(ask(&mut b, &bin, true));
    }
    assert_eq!(outcome[1], outcome[0], "binary out-of-memory reply");
    for c in [&mut mc, &mut us] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

/// A memcached command line full of options about memcached's internals
/// starts (those without effect here said so), applies -P, -k, -f and -n, and serves;
/// what cannot apply (-d, -B, extstore) is refused saying why.
#[test]
fn memcached_command_lines_start_or_say_why_not() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("cn.pid");
    let ready = dir.path().join("ready.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-p", "0", "-l", "127.0.0.1", "-m", "16", "-f", "1.25", "-n", "48", "-R", "20", "-b", "1024"])
        .args(["-k", "-r", "-L", "-D", ":", "-o", "modern,no_lru_crawler,idle_timeout=5,hashpower=16,slab_reassign"])
        .arg("-P")
        .arg(&pidfile)
        .arg("--ready-file")
        .arg(&ready)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the node exited");
        assert!(std::time::Instant::now() < deadline, "no ready file");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(std::fs::read_to_string(&pidfile).unwrap().trim(), child.id().to_string());
    let info: serde_json::Value = serde_json::from_slice(&std::fs::read(&ready).unwrap()).unwrap();
    let mut s = std::net::TcpStream::connect(info["addr"].as_str().unwrap()).unwrap();
    s.write_all(b"set a 0 0 1\r\nx\r\nget a\r\nquit\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert_eq!(out, b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n");
    child.kill().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    child.wait().unwrap();
    assert!(err.contains("accepted without effect") && err.contains("idle_timeout"), "{err}");
    for (argv, why) in [(&["-d"][..], "service manager"), (&["-o", "ext_path=/tmp/x:1g"], "extstore")] {
        let out = Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "-p", "0"]).args(argv).output().unwrap();
        assert!(!out.status.success(), "{argv:?} started");
        assert!(String::from_utf8_lossy(&out.stderr).contains(why), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v = Command::new(env!("CARGO_BIN_EXE_imca")).args(["cache-node", "-V"]).output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("memcached 1.6.18"), "scripts read memcached's version");
}

/// -A: `shutdown` stops the node as it stops memcached (the connection
/// closes, the process exits 0); another mode is refused as memcached does.
#[test]
fn shutdown_command_with_enable_shutdown() {
    use std::io::{Read, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_imca"))
        .args(["cache-node", "-l", "127.0.0.1", "-A", "-p", &port.to_string()])
        .spawn()
        .unwrap();
    let mut s = connect(&format!("127.0.0.1:{port}"));
    s.write_all(b"shutdown bogus\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"CLIENT_ERROR invalid shutdown mode\r\n");
    s.write_all(b"shutdown\r\n").unwrap();
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "the connection closes");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(std::time::Instant::now() < deadline, "the node did not stop");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

/// Item sizes are memcached's: `stats bytes` and `me`'s `size` read the same
/// for the same items (tools that watch `bytes` see memcached's numbers).
#[test]
fn item_sizes_match_memcached() {
    use std::io::{Read, Write};
    common_require_memcached();
    let mc = Memcached::start();
    let us = Memcached::cache_node(Path::new(env!("CARGO_BIN_EXE_imca")), &[]);
    let (pm, pi) = (mc.port(), us.port());
    let mut script = Vec::new();
    for (i, n) in [0usize, 1, 2, 100, 1000, 4096, 100_000].iter().enumerate() {
        script.extend_from_slice(format!("set key{i} 0 0 {n}\r\n").as_bytes());
        script.extend(std::iter::repeat_n(b'x', *n));
        script.extend_from_slice(b"\r\n");
    }
    script.extend_from_slice(b"me key0\r\nme key3\r\nme key6\r\nstats\r\nquit\r\n");
    let run = |p: u16| {
        let mut s = connect(&format!("127.0.0.1:{p}"));
        s.write_all(&script).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let sizes: Vec<String> =
            out.lines().filter(|l| l.starts_with("ME ")).map(|l| l.split(' ').find(|w| w.starts_with("size=")).unwrap().to_string()).collect();
        let bytes = out.lines().find(|l| l.starts_with("STAT bytes ")).unwrap().to_string();
        (sizes, bytes)
    };
    assert_eq!(run(pi), run(pm));
}

/// `-s`, `-a`: what memcached does with a socket path it cannot use (exit
/// 71, "failed to listen on UNIX socket: PATH"), the same file modes for a
/// mask, a dead node's socket file replaced; and where this node differs on
/// purpose: a live node's socket is not taken over, and a mask that is not
/// octal is refused (memcached reads `-a abc` as 0, a socket no one can use).
#[test]
fn unix_socket_flags_like_memcached() {
    use std::os::unix::fs::PermissionsExt;
    common_require_memcached();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("regular"), "not a socket").unwrap();
    let imca = |argv: &[&str]| Command::new(env!("CARGO_BIN_EXE_imca")).arg("cache-node").args(argv).output().unwrap();
    let memcached = |argv: &[&str]| Command::new("memcached").args(["-U", "0", "-u", "root"]).args(argv).output().unwrap();
    for path in [d.join("no/such/dir/sock"), d.join("regular")] {
        let p = path.to_str().unwrap();
        let (mc, us) = (memcached(&["-s", p]), imca(&["-s", p]));
        assert_eq!(us.status.code(), Some(71));
        assert_eq!(us.status.code(), mc.status.code(), "{p}");
        let want = format!("failed to listen on UNIX socket: {p}");
        for out in [&mc, &us] {
            assert!(String::from_utf8_lossy(&out.stderr).contains(&want), "{p}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert_eq!(std::fs::read(d.join("regular")).unwrap(), b"not a socket", "a file that is not a socket is never removed");
    }
    // a TCP port in use: memcached's words and exit status
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let (mc, us) = (memcached(&["-l", "127.0.0.1", "-p", &port]), imca(&["-l", "127.0.0.1", "-p", &port]));
    assert_eq!((us.status.code(), mc.status.code()), (Some(71), Some(71)));
    let want = String::from_utf8_lossy(&mc.stderr).trim().to_string();
    assert!(String::from_utf8_lossy(&us.stderr).contains(&want), "{want:?} vs {}", String::from_utf8_lossy(&us.stderr));
    let bad_mask = imca(&["-s", d.join("m.sock").to_str().unwrap(), "-a", "abc"]);
    assert_eq!(bad_mask.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&bad_mask.stderr).contains("octal"), "{}", String::from_utf8_lossy(&bad_mask.stderr));

    // a mask gives the socket file the mode memcached gives it
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let spawn_on = |bin: &str, sock: &std::path::Path, mask: &str| {
        let mut c = Command::new(bin);
        if bin == "memcached" {
            c.args(["-U", "0", "-u", "root"]);
        } else {
            c.arg("cache-node");
        }
        let child = c.arg("-s").arg(sock).args(["-a", mask]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(sock).is_err() {
            assert!(Instant::now() < deadline, "nothing listens on {}", sock.display());
            std::thread::sleep(Duration::from_millis(10)); // polling readiness
        }
        child
    };
    let (sm, si) = (d.join("mc.sock"), d.join("imca.sock"));
    for mask in ["0770", "666", "1777"] {
        let mut mc = spawn_on("memcached", &sm, mask);
        let mut us = spawn_on(env!("CARGO_BIN_EXE_imca"), &si, mask);
        assert_eq!(mode(&si), mode(&sm), "-a {mask}");
        for c in [&mut mc, &mut us] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
    // both left their (now dead) socket files: starting again replaces them
    assert!(si.exists() && sm.exists());
    let mut us = spawn_on(env!("CARGO_BIN_EXE_imca"), &si, "700");
    assert_eq!(mode(&si), 0o700);
    // a live node's socket is not taken over: the second start fails, the first still answers
    let second = imca(&["-s", si.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(71));
    assert!(String::from_utf8_lossy(&second.stderr).contains("already in use"), "{}", String::from_utf8_lossy(&second.stderr));
    let mut s = std::os::unix::net::UnixStream::connect(&si).unwrap();
    s.write_all(b"version\r\nquit\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert_eq!(out, "VERSION 1.6.18\r\n");
    us.kill().unwrap();
    us.wait().unwrap();
}

/// A connection to a daemon just spawned: retried until it listens (its
/// readiness), at most 10 s.
fn connect(addr: &str) -> std::net::TcpStream {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(_) if std::time::Instant::now() < deadline => std::thread::yield_now(),
            Err(e) => panic!("{addr}: {e}"),
        }
    }
}

fn common_require_memcached() {
    assert!(
        Command::new("memcached").arg("-h").output().is_ok(),
        "memcached is not installed (apt-get install memcached; ./dev deps does)"
    );
}
