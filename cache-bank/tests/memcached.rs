//! A real Debian memcached on a free loopback port, for tests.
#![allow(dead_code)]

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Memcached {
    pub child: Child,
    pub port: u16,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Memcached {
    pub fn start() -> Memcached {
        Self::on(free_port())
    }

    pub fn on(port: u16) -> Memcached {
        Self::with(port, &[])
    }

    /// On `port`, with more of memcached's flags (e.g. `-Y authfile`).
    pub fn with(port: u16, extra: &[&str]) -> Memcached {
        let bin = "/usr/bin/memcached";
        assert!(std::path::Path::new(bin).exists(), "these tests need Debian's memcached (apt-get install memcached)");
        let child = Command::new(bin)
            .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0", "-m", "64", "-t", "2", "-u", "nobody"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start memcached");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "memcached did not start on port {port}");
            std::thread::sleep(Duration::from_millis(10));
        }
        Memcached { child, port }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn signal(&self, sig: i32) {
        unsafe {
            libc_kill(self.child.id() as i32, sig);
        }
    }

    pub fn kill(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.signal(18); // SIGCONT, in case a test froze it
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub const SIGSTOP: i32 = 19;
pub const SIGCONT: i32 = 18;
