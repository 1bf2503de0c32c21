//! Only the volume writes its bank (issue "Step 1", finding 1): a local
//! user who can reach a cache node saved a file's MAC-valid attributes while
//! it was 0644, wrote them back after root made it 0600, and a gateway
//! mounted afterwards served the old mode and the new content to that user.
//! The MAC proves who wrote a value, not that it is current; so the nodes
//! now require the volume's login (memcached's `-Y`, derived from the volume
//! secret) and the volume's daemons refuse nodes that do not.
//!
//! Played here against `imca cache-node` and Debian's memcached, with the
//! kernel's caches off so every stat and read asks the bank.

mod common;

use common::{Cache, ClusterSpec};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

const ATTACKER: u32 = 1001;

/// One text-protocol exchange on a fresh connection; what the node said.
fn raw(addr: &str, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    // a reply line is enough (or the node closing on us)
    while !out.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    out
}

/// A connection logged in as the volume (the test plays the old attacker's
/// *reading* half with the volume's own login: with logins on, no stranger
/// can read a value to replay).
struct Insider(TcpStream);

impl Insider {
    fn login(addr: &str, auth_file: &std::path::Path) -> Insider {
        let line = std::fs::read_to_string(auth_file).unwrap();
        let (user, pass) = line.trim().split_once(':').unwrap();
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let data = format!("{user} {pass}");
        s.write_all(format!("set imca:auth 0 -1 {}\r\n{data}\r\n", data.len()).as_bytes()).unwrap();
        let mut i = Insider(s);
        assert_eq!(i.line(), "STORED", "the volume's login is accepted");
        i
    }

    fn line(&mut self) -> String {
        let mut out = Vec::new();
        let mut b = [0u8; 1];
        while !out.ends_with(b"\r\n") {
            self.0.read_exact(&mut b).unwrap();
            out.push(b[0]);
        }
        String::from_utf8_lossy(&out[..out.len() - 2]).into_owned()
    }

    fn get(&mut self, key: &str) -> Option<Vec<u8>> {
        self.0.write_all(format!("get {key}\r\n").as_bytes()).unwrap();
        let head = self.line();
        if head == "END" {
            return None;
        }
        let len: usize = head.rsplit(' ').next().unwrap().parse().unwrap();
        let mut v = vec![0u8; len + 2];
        self.0.read_exact(&mut v).unwrap();
        v.truncate(len);
        assert_eq!(self.line(), "END");
        Some(v)
    }
}

fn replay_is_refused(cache: Cache) {
    let mut c = ClusterSpec::new().storage(2).cache(cache).gateways(1).kernel_cache(false).start();
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let node = c.cache_addrs()[0].clone();
    let file = c.path("diary");
    let old = b"the old, public content of the diary".to_vec();
    std::fs::write(&file, &old).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

    // The keys an attacker would derive (volume, epoch, block size, file id).
    let keys = common::bank_keys(&c);
    let fid = xlator::FileId::from_hex(&common::xattr(&c.export(0).join("diary"), "user.imca.fid")).unwrap();
    let (skey, bkey) = (keys.stat(fid).key, keys.block(fid, 0).key);

    // The 0644 attributes and the old block, as they sit in the bank.
    let mut insider = Insider::login(&node, &c.cache_auth_file());
    let deadline = Instant::now() + Duration::from_secs(20);
    let (stat, block) = loop {
        assert_eq!(std::fs::read(&file).unwrap(), old);
        let _ = std::fs::metadata(&file);
        match (insider.get(&skey), insider.get(&bkey)) {
            // a stored stat is a MACed value (format 2), not a claim's placeholder
            (Some(s), Some(b)) if s.len() > 20 && &s[..3] == b"IM\x02" && b.len() > 20 => break (s, b),
            other => assert!(Instant::now() < deadline, "the stat and block never reached the bank: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };

    // A stranger on the node, without the login, reads nothing…
    for req in [format!("get {skey}\r\n"), "stats\r\n".to_string(), "lru_crawler metadump all\r\n".to_string()] {
        let said = raw(&node, req.as_bytes());
        assert!(said.starts_with(b"CLIENT_ERROR"), "{req:?} without a login: {:?}", String::from_utf8_lossy(&said));
    }

    // Root makes the diary private and writes the secret.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = b"the new, private content: not for uid 1001".to_vec();
    std::fs::write(&file, &secret).unwrap();

    // …and cannot write the saved 0644 attributes and old block back.
    for (key, value) in [(&skey, &stat), (&bkey, &block)] {
        let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(value);
        req.extend_from_slice(b"\r\n");
        let said = raw(&node, &req);
        assert!(!said.starts_with(b"STORED"), "a stranger stored {key}: {:?}", String::from_utf8_lossy(&said));
    }

    // A gateway mounted afterwards serves the truth: mode 0600, root's
    // secret to root, nothing to uid 1001.
    let g = c.add_gateway(&[]);
    let fresh = c.path_at(g, "diary");
    let meta = std::fs::metadata(&fresh).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read(&fresh).unwrap(), secret);
    let out = Command::new("cat").arg(&fresh).uid(ATTACKER).gid(ATTACKER).output().unwrap();
    assert!(!out.status.success(), "uid {ATTACKER} read root's 0600 file: {:?}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(meta.uid(), 0);
}

#[test]
fn a_stranger_cannot_replay_old_values_into_imca_cache_nodes() {
    replay_is_refused(Cache::Imca(1));
}

#[test]
fn a_stranger_cannot_replay_old_values_into_memcached() {
    replay_is_refused(Cache::Memcached(1));
}

/// A node started without `-Y` takes anyone's writes: the volume's daemons
/// do not use it and say why, unless the operator passed
/// `--cache-allow-open-nodes` (logged at start, shown by `imca ctl status`).
#[test]
fn a_node_without_a_login_is_refused_unless_allowed() {
    let c = ClusterSpec::new().storage(1).cache(Cache::None).gateways(0).start();
    let ready = c.dir.path().join("open-node.ready");
    let args = ["cache-node", "-l", "127.0.0.1", "-p", "0", "-m", "16", "--ready-file"];
    let mut args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    args.push(ready.clone().into());
    let node = common::Daemon::start("open-node", common::imca_bin(), args, Some(ready), &c.logs());
    let addr = node.addr();

    // A gateway told to use it refuses to start, saying why and what to do.
    let mount = c.dir.path().join("mnt-refused");
    std::fs::create_dir_all(&mount).unwrap();
    let out = Command::new(common::imca_bin())
        .args(["mount", "--storage-servers", &c.storage_addrs()[0], "--cache-nodes", &addr, "--secret-file"])
        .arg(c.secret_file())
        .arg(&mount)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a gateway mounted with a node anyone may write");
    assert!(e.contains("without a login") && e.contains("imca secret cache-auth"), "{e}");
    assert!(e.contains("--cache-allow-open-nodes"), "{e}");
    common::force_unmount(&mount);
}

/// The operator's explicit choice: every daemon passed
/// `--cache-allow-open-nodes` uses an open node, logs it at start, and
/// `imca ctl status` shows it.
#[test]
fn open_nodes_are_used_when_the_operator_allows_them() {
    let c = ClusterSpec::new()
        .storage(1)
        .cache(Cache::Imca(1))
        .open_cache()
        .gateways(1)
        .kernel_cache(false)
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    let data = vec![7u8; 100_000];
    std::fs::write(c.path("f"), &data).unwrap();
    // Used: reads come to be answered by the node (the gateway stores what
    // it read after answering, so a hit may take a few reads).
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        assert_eq!(std::fs::read(c.path("f")).unwrap(), data);
        let status: admin::Status = c.gateways[0].admin().get("/api/v1/status").unwrap();
        if status.cache_nodes[0].hits > 0 {
            break status;
        }
        assert!(Instant::now() < deadline, "the open node was never used: {:?}", status.cache_nodes);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.gateway.open_cache_nodes_allowed);
    let n = &status.cache_nodes[0];
    assert_eq!(n.login.as_deref(), Some("none"), "{n:?}");
    let log = std::fs::read_to_string(&c.gateways[0].daemon.log).unwrap();
    assert!(log.contains("--cache-allow-open-nodes"), "the choice is logged at start:\n{log}");
    // And with logins on (the default), the same status says "required".
    let c = ClusterSpec::new().storage(1).cache(Cache::Imca(1)).gateways(1).gateway_arg("--admin").gateway_arg("127.0.0.1:0").start();
    std::fs::write(c.path("f"), &data).unwrap();
    assert_eq!(std::fs::read(c.path("f")).unwrap(), data);
    let status: admin::Status = c.gateways[0].admin().get("/api/v1/status").unwrap();
    assert!(!status.gateway.open_cache_nodes_allowed);
    assert_eq!(status.cache_nodes[0].login.as_deref(), Some("required"), "{:?}", status.cache_nodes[0]);
}
