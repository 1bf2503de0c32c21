//! Bank nodes as child processes.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Debian's memcached 1.6
    Memcached,
    /// `imca cache-node`
    Imca,
}

pub struct BankNode {
    pub kind: NodeKind,
    pub port: u16,
    child: Option<Child>,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl BankNode {
    pub fn start(kind: NodeKind) -> BankNode {
        let mut n = BankNode { kind, port: free_port(), child: None };
        n.spawn();
        n
    }

    fn spawn(&mut self) {
        let port = self.port.to_string();
        let mut cmd = match self.kind {
            NodeKind::Memcached => {
                let bin = "/usr/bin/memcached";
                assert!(
                    std::path::Path::new(bin).exists(),
                    "coherence tests need Debian's memcached (apt-get install memcached)"
                );
                let mut c = Command::new(bin);
                c.args(["-p", &port, "-l", "127.0.0.1", "-U", "0", "-m", "64", "-t", "2", "-u", "nobody"]);
                c
            }
            NodeKind::Imca => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_imca"));
                c.args(["cache-node", "-p", &port, "-l", "127.0.0.1", "-U", "0", "-m", "64", "-t", "2"]);
                c
            }
        };
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start a bank node");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "{:?} did not start on port {}", self.kind, self.port);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn freeze(&self) {
        unsafe { libc::kill(self.pid(), libc::SIGSTOP) };
    }

    pub fn thaw(&self) {
        unsafe { libc::kill(self.pid(), libc::SIGCONT) };
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start again on the same port (empty, as a restarted node is).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for BankNode {
    fn drop(&mut self) {
        self.kill();
    }
}
