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

    pub fn with(extra: &[&str]) -> Memcached {
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
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "memcached did not start on {addr}");
            std::thread::sleep(Duration::from_millis(10)); // polling readiness, not waiting for it
        }
        Memcached(child, addr)
    }
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
