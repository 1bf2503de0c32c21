//! Memcached-speaking servers as child processes: Debian's memcached (the
//! reference the differential tests compare with, and a bank node) and
//! `imca cache-node` started the same way, with memcached's flags.

use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// How long a server has to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The path of an installed tool; panics, saying how to install it, if it is not.
pub fn need(tool: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = format!("{dir}/{tool}");
        if Path::new(&p).exists() {
            return p;
        }
    }
    panic!("`{tool}` is not installed: run `./dev deps` (Debian packages memcached libmemcached-tools)");
}

/// memcached refuses to run as root without `-u`; as root, stay root (a
/// UNIX socket in a test's directory stays reachable).
fn user_flags() -> Vec<&'static str> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        vec!["-u", "root"]
    } else {
        vec![]
    }
}

/// Which server to run.
#[derive(Clone, Debug)]
pub enum Program {
    /// Debian's memcached
    Memcached,
    /// `imca cache-node`, from this `imca` binary
    CacheNode(PathBuf),
}

impl Program {
    /// The command for a server on `127.0.0.1:port`, with `extra` flags
    /// after the defaults (64 MB, 2 threads, no UDP).
    fn command(&self, port: u16, extra: &[String]) -> Command {
        let port = port.to_string();
        let mut c = match self {
            Program::Memcached => {
                let mut c = Command::new(need("memcached"));
                c.args(user_flags()).args(["-c", "1024"]);
                c
            }
            Program::CacheNode(imca) => {
                let mut c = Command::new(imca);
                c.arg("cache-node");
                c
            }
        };
        c.args(["-l", "127.0.0.1", "-p", &port, "-U", "0", "-m", "64", "-t", "2"]).args(extra);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        c
    }
}

/// A memcached-speaking server on a loopback port, killed on drop (after a
/// SIGCONT, in case a test froze it).
pub struct Memcached {
    pub addr: SocketAddr,
    program: Program,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Memcached {
    /// Debian's memcached on a free port.
    pub fn start() -> Memcached {
        Memcached::with(&[])
    }

    /// Debian's memcached on a free port, with more of its flags (`-Y file`, `-B binary`, ...).
    pub fn with(extra: &[&str]) -> Memcached {
        Memcached::run(Program::Memcached, extra)
    }

    /// `imca cache-node` (the binary `imca`) on a free port, with memcached's
    /// flags. `extra` must not repeat the defaults' flags (`-l -p -U -m -t`):
    /// memcached takes the last, `imca`'s parser refuses a flag given twice.
    pub fn cache_node(imca: &Path, extra: &[&str]) -> Memcached {
        Memcached::run(Program::CacheNode(imca.to_path_buf()), extra)
    }

    /// `program` on a free port. The port is free when picked, but another
    /// test may take it before the server binds it: then the server exits,
    /// and the port answers for someone else. So the server found there
    /// must say it is this child (`stats` pid), or the start is tried again
    /// on another port.
    pub fn run(program: Program, extra: &[&str]) -> Memcached {
        for _ in 0..5 {
            let mut m = Memcached::new(program.clone(), free_port(), extra);
            if m.spawn() {
                return m;
            }
        }
        panic!("{program:?} did not start on any of 5 free ports");
    }

    /// Debian's memcached on `port` (a port a test kept, to restart a node
    /// where the bank expects it); panics if it does not come up there.
    pub fn on(port: u16, extra: &[&str]) -> Memcached {
        let mut m = Memcached::new(Program::Memcached, port, extra);
        assert!(m.spawn(), "memcached did not start on port {port}");
        m
    }

    fn new(program: Program, port: u16, extra: &[&str]) -> Memcached {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        Memcached { addr, program, extra: extra.iter().map(|s| s.to_string()).collect(), child: None }
    }

    /// Starts the server and waits until it answers; `false` if it exited
    /// (its port was taken) or someone else answers there.
    fn spawn(&mut self) -> bool {
        let child = self.program.command(self.addr.port(), &self.extra).spawn().expect("start a memcached-speaking server");
        let child = self.child.insert(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if child.try_wait().ok().flatten().is_some() {
                return false; // it exited: the port was taken
            }
            if let Ok(s) = TcpStream::connect(self.addr) {
                return match pid_of(s) {
                    Some(pid) => pid == child.id(),
                    // no ASCII `stats` here (-B binary, -Y authfile): alive is all we can check
                    None => child.try_wait().ok().flatten().is_none(),
                };
            }
            assert!(Instant::now() < deadline, "{:?} did not start on {}", self.program, self.addr);
            std::thread::sleep(Duration::from_millis(10)); // polling readiness, not waiting for it
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `host:port`, as a bank's node list takes it.
    pub fn addr_string(&self) -> String {
        self.addr.to_string()
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// SIGSTOP: the node hangs, its connections stay open.
    pub fn freeze(&self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.pid(), libc::SIGSTOP) };
    }

    /// SIGCONT after [`Self::freeze`].
    pub fn thaw(&self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.pid(), libc::SIGCONT) };
    }

    /// Stops the server (it may be started again on the same port with
    /// [`Self::restart`]); returns its port.
    pub fn kill(&mut self) -> u16 {
        if let Some(mut c) = self.child.take() {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
        self.addr.port()
    }

    /// Starts it again on the same port, empty as a restarted node is.
    pub fn restart(&mut self) {
        self.kill();
        assert!(self.spawn(), "{:?} did not start again on {}", self.program, self.addr);
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
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
pub struct MemcachedUnix(Child);

impl MemcachedUnix {
    pub fn start(path: &Path, extra: &[&str]) -> MemcachedUnix {
        let child = Command::new(need("memcached"))
            .args(user_flags())
            .args(["-U", "0", "-m", "64", "-t", "2", "-c", "1024", "-s"])
            .arg(path)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start memcached");
        let deadline = Instant::now() + START_TIMEOUT;
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
