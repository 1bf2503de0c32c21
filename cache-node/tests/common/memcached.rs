//! Debian's memcached for the differential tests: on a free loopback port
//! or a UNIX socket, killed on drop.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn need(tool: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = format!("{dir}/{tool}");
        if std::path::Path::new(&p).exists() {
            return p;
        }
    }
    panic!("`{tool}` is not installed: run `./dev deps` (Debian packages memcached libmemcached-tools)");
}

/// Debian's memcached on a free loopback port, killed on drop.
pub struct Memcached(pub Child, pub SocketAddr);

impl Memcached {
    pub fn start() -> Memcached {
        Memcached::with(&[])
    }

    /// The port is free when picked, but another test may take it before
    /// memcached binds it: then memcached exits, and the port answers for
    /// someone else. So the server found there must say it is this child
    /// (`stats` pid), or the start is tried again on another port.
    pub fn with(extra: &[&str]) -> Memcached {
        for _ in 0..5 {
            if let Some(m) = Memcached::try_with(extra) {
                return m;
            }
        }
        panic!("memcached did not start on any of 5 free ports");
    }

    fn try_with(extra: &[&str]) -> Option<Memcached> {
        let bin = need("memcached");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let user = if unsafe { libc_geteuid() } == 0 { vec!["-u", "root"] } else { vec![] };
        let child = Command::new(bin)
            .args(user)
            .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "64", "-t", "2", "-c", "1024"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start memcached");
        let mut m = Memcached(child, format!("127.0.0.1:{port}").parse().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if m.0.try_wait().ok().flatten().is_some() {
                return None; // it exited: the port was taken
            }
            if let Ok(s) = TcpStream::connect(m.1) {
                return match pid_of(s) {
                    Some(pid) => (pid == m.0.id()).then_some(m),
                    // no ASCII `stats` here (-B binary, -Y authfile): alive is all we can check
                    None => m.0.try_wait().ok().flatten().is_none().then_some(m),
                };
            }
            assert!(Instant::now() < deadline, "memcached did not start on {}", m.1);
            std::thread::sleep(Duration::from_millis(10)); // polling readiness, not waiting for it
        }
    }
}

/// The `pid` a server at the other end of `s` reports in `stats`.
fn pid_of(mut s: TcpStream) -> Option<u32> {
    use std::io::{Read, Write};
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?; // unanswered: checked by being alive
    s.write_all(b"stats\r\n").ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !text.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 || (text.is_empty() && !buf[..n].starts_with(b"STAT ")) {
            return None; // closed, or refused (an error line)
        }
        text.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&text);
    text.lines().find_map(|l| l.strip_prefix("STAT pid ")).and_then(|p| p.trim().parse().ok())
}

/// Debian's memcached on a UNIX socket (`-s path`, no TCP), killed on drop.
pub struct MemcachedUnix(pub Child);

impl MemcachedUnix {
    pub fn start(path: &std::path::Path, extra: &[&str]) -> MemcachedUnix {
        let bin = need("memcached");
        let user = if unsafe { libc_geteuid() } == 0 { vec!["-u", "root"] } else { vec![] };
        let child = Command::new(bin)
            .args(user)
            .args(["-U", "0", "-m", "64", "-t", "2", "-c", "1024", "-s"])
            .arg(path)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start memcached");
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(path).is_err() {
            assert!(Instant::now() < deadline, "memcached did not start on {}", path.display());
            std::thread::sleep(Duration::from_millis(10)); // polling readiness, not waiting for it
        }
        MemcachedUnix(child)
    }
}

impl Drop for MemcachedUnix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
