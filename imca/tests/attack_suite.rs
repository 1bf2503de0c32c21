//! The attack suite of the "Trust boundaries" issue: each attack an
//! ordinary local user (uid 1001) made on an `imca up`-like cluster, made
//! again against the real daemons, and what must now happen instead —
//! refused, answered as a miss, or bounded, with the daemons alive and no
//! data changed. Lower-level reproductions of the same bullets live next
//! to the code they exercise (storage-server/tests/{client_trust,bounds}.rs,
//! transport/tests/{auth,bounds,tls}.rs, server-translator/posix/tests/space.rs,
//! imca/tests/ops_admin.rs for the admin API); docs/operations.md lists them.

mod common;

use common::{http_get, Cache, ClusterSpec};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

const ATTACKER: u32 = 1001;

/// The value of a Prometheus counter with this exact label set, 0 if absent.
fn counter(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok())).unwrap_or(0.0)
}

#[test]
fn strangers_on_the_storage_port_are_refused_before_any_operation() {
    common::require_tool("python3", "python3");
    let c = ClusterSpec::new().storage(2).gateways(1).start();
    // root's private file, written through the gateway
    let private = c.path("root-only");
    std::fs::write(&private, b"root's secret content").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Only the secret's own mode may keep the attacker out of it.
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/attack/storage_port.py");
    let source = std::fs::read_to_string(script).unwrap();
    let out = Command::new("python3")
        .arg("-c")
        .arg(&source)
        .arg(&c.storage_addrs()[0])
        .arg(c.secret_file())
        .arg(transport::tcp::PROTOCOL_VERSION.to_string())
        .uid(ATTACKER)
        .gid(ATTACKER)
        .output()
        .unwrap();
    assert!(out.status.success(), "attacker script: {}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["uid"], ATTACKER);
    assert_eq!(r["secret"], "denied", "the volume secret is mode 0600: {r}");
    assert_eq!(r["no_credentials"]["status"], 3, "status 3: credentials required: {r}");
    assert_eq!(r["guessed_proof"]["server_hello"], 88);
    assert_eq!(r["guessed_proof"]["status"], 4, "status 4: authentication failed: {r}");
    assert_eq!(r["guessed_proof"]["after"], 0, "not a byte of any reply after the refusal: {r}");
    assert_eq!(r["reflected_proof"]["status"], 4, "the server's own proof does not pass as a client's: {r}");

    // Counted and logged on the server, which goes on serving the volume.
    let metrics = http_get(&c.storage[0].metrics_url().unwrap());
    let refused = counter(&metrics, "imca_storage_rpc_connections_closed_total{reason=\"auth_failed\"}");
    assert!(refused >= 3.0, "auth_failed closes: {refused}\n{metrics}");
    assert!(c.storage[0].log_tail(200).contains("storage RPC handshake refused"));
    assert_eq!(std::fs::read(&private).unwrap(), b"root's secret content");
    std::fs::write(c.path("after"), b"still served").unwrap();
    assert_eq!(std::fs::read(c.path("after")).unwrap(), b"still served");
}

#[test]
fn a_gateway_with_another_volumes_secret_or_none_cannot_mount() {
    let mut c = ClusterSpec::new().storage(1).gateways(0).start();
    let other = c.dir.path().join("other.secret");
    let made = Command::new(common::imca_bin()).args(["secret", "new"]).arg(&other).output().unwrap();
    assert!(made.status.success());
    let mount = c.dir.path().join("mnt-x");
    std::fs::create_dir_all(&mount).unwrap();
    let try_mount = |creds: &[&std::ffi::OsStr]| {
        let out = Command::new(common::imca_bin())
            .args(["mount", "--storage-servers", &c.storage_addrs()[0]])
            .args(creds)
            .arg(&mount)
            .env_remove("IMCA_SECRET_FILE")
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = try_mount(&["--secret-file".as_ref(), other.as_os_str()]);
    assert!(e.contains("does not hold this volume's secret"), "{e}");
    let e = try_mount(&["--insecure".as_ref()]);
    assert!(e.contains("requires the volume's credentials"), "{e}");
    let e = try_mount(&[]);
    assert!(e.contains("no volume secret") && e.contains("--secret-file"), "{e}");
    common::force_unmount(&mount);
    // The right secret still mounts.
    c.add_gateway(&[]);
    std::fs::write(c.path("x"), b"ok").unwrap();
}

#[test]
fn tls_and_an_allow_list_serve_a_real_mount() {
    common::require_tool("openssl", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[&["req", "-x509"], &ec[..], &["-days", "2", "-subj", "/CN=ca", "-keyout", &p("ca.key"), "-out", &p("ca.pem")]].concat());
    run(&[&["req", "-new"], &ec[..], &["-subj", "/CN=storage", "-keyout", &p("s.key"), "-out", &p("s.csr")]].concat());
    std::fs::write(p("s.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n").unwrap();
    run(&["x509", "-req", "-in", &p("s.csr"), "-CA", &p("ca.pem"), "-CAkey", &p("ca.key"), "-CAcreateserial", "-days", "2",
          "-extfile", &p("s.ext"), "-out", &p("s.pem")]);
    let mut c = ClusterSpec::new()
        .storage(2)
        .cache(Cache::Imca(1))
        .gateways(0)
        .storage_arg("--tls-cert")
        .storage_arg(p("s.pem"))
        .storage_arg("--tls-key")
        .storage_arg(p("s.key"))
        .storage_arg("--auth-allow")
        .storage_arg("10.0.0.0/8,127.0.0.0/8")
        .start();
    c.add_gateway(&["--tls-ca", &p("ca.pem")]);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(c.path("over-tls"), &data).unwrap();
    assert_eq!(std::fs::read(c.path("over-tls")).unwrap(), data);
    // A gateway without the CA is told the servers need TLS.
    let mount = c.dir.path().join("mnt-plain");
    std::fs::create_dir_all(&mount).unwrap();
    let out = Command::new(common::imca_bin())
        .args(["mount", "--storage-servers", &c.storage_addrs().join(",")])
        .arg("--secret-file")
        .arg(c.secret_file())
        .arg(&mount)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("requires TLS"), "{e}");
    common::force_unmount(&mount);
}

/// `getxattr` of a path, as text.
/// Issue 32: 64 trickling connections from any local user made a
/// gateway's admin API answer 503 to everyone, the token holder included,
/// for as long as they came. Now they hold that user's share only.
#[test]
fn trickling_connections_to_the_admin_api_never_keep_the_token_holder_out() {
    use std::io::BufRead;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    common::require_tool("python3", "python3");
    let c = ClusterSpec::new().storage(1).gateways(1).gateway_arg("--admin").gateway_arg("127.0.0.1:0").start();
    let url = c.gateways[0].admin_url().expect("admin URL");
    let addr = url.trim_start_matches("http://").to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../admin/tests/attack/trickle.py");
    let mut attacker = Command::new("python3")
        .arg("-c")
        .arg(std::fs::read_to_string(script).unwrap())
        .arg(&addr)
        .arg("100")
        .uid(ATTACKER)
        .gid(ATTACKER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(attacker.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let admin = c.gateways[0].admin();
    let cfg: serde_json::Value = admin.get("/api/v1/config").unwrap();
    let change = serde_json::json!({ "timeout_ms": cfg["timeout_ms"] }).to_string();
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    while t0.elapsed() < admin::limits::HEADER_TIMEOUT + Duration::from_secs(1) {
        let t = Instant::now();
        let r = admin.request("GET", "/api/v1/status", None).unwrap();
        assert_eq!(r.status, 200, "status refused while uid {ATTACKER} trickled: {}", r.text());
        let r = admin.request("PUT", "/api/v1/config", Some(change.as_bytes())).unwrap();
        assert_eq!(r.status, 200, "a change refused while uid {ATTACKER} trickled: {}", r.text());
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(attacker.stdin.take());
    line.clear();
    out.read_line(&mut line).unwrap();
    let _ = attacker.wait();
    println!("token holder's slowest status+change {slowest:?}; the attacker: {line}");
    assert!(slowest < Duration::from_secs(2), "the token holder waited {slowest:?}");
}

#[test]
fn forged_bank_values_under_the_right_keys_do_not_reach_applications() {
    // The kernel's cache off: every stat and read must ask the bank, where
    // the forgeries wait (with it on, the kernel would answer most of them).
    // The node runs open (no `-Y`, and the daemons are told to use it
    // anyway): the MACs are the second line of defence, tried here alone.
    let c = ClusterSpec::new().storage(2).cache(Cache::Imca(1)).open_cache().gateways(1).kernel_cache(false).start();
    std::fs::set_permissions(c.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = c.path("root-only");
    let truth: Vec<u8> = b"root's secret content, one block of it".to_vec();
    std::fs::write(&private, &truth).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::read(&private).unwrap(), truth); // populates stat and block 0

    // What the old attack derived from the bank alone, taken here from the
    // servers: the volume's name, epoch, block size and the file's id.
    let keys = common::bank_keys(&c);
    let fid = xlator::FileId::from_hex(&common::xattr(&c.export(0).join("root-only"), "user.imca.fid")).unwrap();
    let (skey, bkey) = (keys.stat(fid), keys.block(fid, 0));
    let node = memcache::Client::connect(format!("memcache://{}?protocol=ascii", c.cache_addrs()[0])).unwrap();
    // The gateway stores what it read after answering (a queued cas): wait
    // until the value, not the claim's placeholder, is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let cached: Vec<u8> = loop {
        let v: Option<Vec<u8>> = node.get(&skey.key).unwrap();
        match v {
            Some(v) if v.len() > 20 && &v[..3] == b"IM\x02" => break v,
            other => {
                assert!(std::time::Instant::now() < deadline, "no MACed stat (format 2) in the bank: {other:?}");
                std::thread::sleep(std::time::Duration::from_millis(20));
                let _ = std::fs::metadata(&private); // a lost claim is made again
            }
        }
    };
    let attr = cache_bank::value::parse_attr(&cached[20..]).expect("a stat payload");

    // The forgeries: a world-readable stat owned by the attacker and a block
    // of its choosing, in the old CRC framing and in the MAC framing with a
    // guessed tag, written as any user of the host can (no node login here).
    let forged_attr = xlator::Attr { perm: 0o644, uid: ATTACKER, ..attr };
    let forged_block = b"forged forged forged forged forged!!!!".to_vec();
    let mut guessed = cached.clone();
    guessed[4..20].copy_from_slice(&[0x5a; 16]);
    let forgeries = [
        (
            cache_bank::value::encode(cache_bank::value::Kind::Stat, &skey.key, &cache_bank::value::attr_payload(&forged_attr)).to_vec(),
            cache_bank::value::encode(cache_bank::value::Kind::Block, &bkey.key, &forged_block).to_vec(),
        ),
        (guessed, {
            let mut b = b"IM\x02B".to_vec();
            b.extend_from_slice(&[0x5a; 16]);
            b.extend_from_slice(&forged_block);
            b
        }),
    ];
    for (stat, block) in forgeries {
        node.set(&skey.key, &stat[..], 0).unwrap();
        node.set(&bkey.key, &block[..], 0).unwrap();
        // The attacker still may not read root's file…
        let out = Command::new("cat").arg(&private).uid(ATTACKER).gid(ATTACKER).output().unwrap();
        assert!(!out.status.success(), "uid {ATTACKER} read root's 0600 file through a forged stat");
        assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
        // …and root reads the truth, with the owner and mode the servers hold.
        let meta = std::fs::metadata(&private).unwrap();
        assert_eq!((meta.permissions().mode() & 0o777, std::os::unix::fs::MetadataExt::uid(&meta)), (0o600, 0));
        assert_eq!(std::fs::read(&private).unwrap(), truth);
    }
    let metrics = http_get(&c.gateways[0].daemon.metrics_url().unwrap());
    let rejected: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("imca_bank_value_rejected_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(rejected >= 4.0, "refused values are counted: {rejected}\n{metrics}");
}
