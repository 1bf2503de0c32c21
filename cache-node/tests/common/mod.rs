//! Starts an in-process cache node on 127.0.0.1:0 on its own runtime thread,
//! so synchronous clients (memcache crate, std sockets) can talk to it.
#![allow(dead_code)]

pub mod memcached;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use cache_node::{Config, Handle};

pub struct TestNode {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub node: std::sync::Arc<cache_node::Node>,
    rt: Option<tokio::runtime::Runtime>,
    handle: Option<Handle>,
}

impl TestNode {
    pub fn start(config: Config) -> TestNode {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let handle = rt.block_on(cache_node::start(config)).expect("start cache node");
        TestNode { addr: handle.addr, metrics_addr: handle.metrics_addr, node: handle.node.clone(), rt: Some(rt), handle: Some(handle) }
    }

    pub fn local() -> TestNode {
        TestNode::start(Config::local())
    }

    pub fn url_ascii(&self) -> String {
        format!("memcache://{}?protocol=ascii", self.addr)
    }

    pub fn url_binary(&self) -> String {
        format!("memcache://{}", self.addr)
    }

    pub fn shutdown(mut self) {
        let h = self.handle.take().unwrap();
        self.rt.as_ref().unwrap().block_on(h.shutdown());
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let (Some(h), Some(rt)) = (self.handle.take(), self.rt.as_ref()) {
            rt.block_on(h.shutdown());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Sends `req` and reads until the reply ends with `until` (or EOF / deadline).
pub fn exchange(addr: SocketAddr, req: &[u8], until: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req).unwrap();
    read_until(&mut s, until)
}

pub fn read_until(s: &mut TcpStream, until: &[u8]) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    read_until_within(s, until, Duration::from_secs(20))
}

/// Reads until `until` ends what arrived, the peer closes, or `limit`
/// passes; the stream must have a read timeout (TCP or UNIX socket).
pub fn read_until_within(s: &mut dyn Read, until: &[u8], limit: Duration) -> Vec<u8> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while Instant::now() < deadline && !out.ends_with(until) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    out
}

/// `stats <arg>` on an open connection, as name → value.
pub fn stats(s: &mut TcpStream, arg: &str) -> std::collections::HashMap<String, String> {
    s.write_all(format!("stats {arg}\r\n").as_bytes()).unwrap();
    let r = read_until(s, b"END\r\n");
    String::from_utf8_lossy(&r)
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("STAT ")?.splitn(2, ' ');
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

/// Our node started from memcached's command line (`-p 0` for a free port),
/// as `imca cache-node ARGS` would be, after `compat::apply`'s checks.
pub fn start_with_args(argv: &[&str]) -> TestNode {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: cache_node::Args,
    }
    use clap::Parser;
    let cli = Cli::parse_from(["imca"].iter().chain(argv).chain(&["-p", "0", "-l", "127.0.0.1", "-t", "2"]));
    assert!(matches!(cache_node::compat::apply(&cli.args.extra).unwrap(), cache_node::compat::Verdict::Start));
    TestNode::start(Config::try_from(&cli.args).unwrap())
}
