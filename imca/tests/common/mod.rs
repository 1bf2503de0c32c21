//! Shared support for the whole-system tests: real `imca` processes (storage
//! servers, cache nodes or memcached, gateways with real FUSE mounts) in a
//! temporary directory, torn down (unmounted, stopped) on drop.
//!
//! ```ignore
//! let c = ClusterSpec::new().storage(2).cache(Cache::Imca(2)).gateways(1).start();
//! std::fs::write(c.path("hello"), b"hi").unwrap();
//! c.storage[1].kill();              // SIGKILL
//! c.storage[1].restart();           // same address, same export
//! let g2 = c.add_gateway(&[]);      // another gateway on the same servers
//! ```
//!
//! Start-up waits on each daemon's `--ready-file` (memcached: its TCP port),
//! never on a sleep. Every daemon logs to `<dir>/logs/<name>.log`; failures
//! quote the log's tail.
#![allow(dead_code)]

use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const IMCA: &str = env!("CARGO_BIN_EXE_imca");

/// The binary clusters run: `IMCA_BIN` if set (e.g. a release build, to time
/// the heavy tests), else [`IMCA`].
pub fn imca_bin() -> OsString {
    std::env::var_os("IMCA_BIN").unwrap_or_else(|| IMCA.into())
}

/// Generous: the test machine is small and busy.
pub const START_DEADLINE: Duration = Duration::from_secs(90);

/// Fail with a clear message when a Debian tool the test needs is missing.
pub fn require_tool(tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(found, "this test needs `{tool}`: apt-get install {package} (or run ./dev deps)");
}

/// Which cache nodes a cluster gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cache {
    None,
    /// `imca cache-node` × n
    Imca(usize),
    /// Debian's memcached × n
    Memcached(usize),
}

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub storage: usize,
    pub cache: Cache,
    pub gateways: usize,
    pub stripe_unit: Option<u64>,
    /// gateway's storage request timeout (seconds)
    pub timeout: Option<f64>,
    /// `imca mount --kernel-cache on|off` (on, the default, unless told)
    pub kernel_cache: bool,
    /// extra arguments for every `imca mount`
    pub gateway_args: Vec<String>,
    /// extra arguments for every `imca storage`
    pub storage_args: Vec<String>,
    /// cache nodes without a login (`-Y`), used with
    /// `--cache-allow-open-nodes`: for tests that play the stranger who
    /// writes the bank. Otherwise the nodes require the volume's login.
    pub open_cache: bool,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterSpec {
    /// 2 storage servers, no cache, 1 gateway.
    pub fn new() -> ClusterSpec {
        ClusterSpec {
            storage: 2,
            cache: Cache::None,
            gateways: 1,
            stripe_unit: None,
            timeout: None,
            kernel_cache: true,
            gateway_args: Vec::new(),
            storage_args: Vec::new(),
            open_cache: false,
        }
    }
    pub fn storage(mut self, n: usize) -> Self {
        self.storage = n;
        self
    }
    pub fn cache(mut self, c: Cache) -> Self {
        self.cache = c;
        self
    }
    pub fn gateways(mut self, n: usize) -> Self {
        self.gateways = n;
        self
    }
    pub fn stripe_unit(mut self, bytes: u64) -> Self {
        self.stripe_unit = Some(bytes);
        self
    }
    pub fn timeout(mut self, secs: f64) -> Self {
        self.timeout = Some(secs);
        self
    }
    pub fn kernel_cache(mut self, on: bool) -> Self {
        self.kernel_cache = on;
        self
    }
    pub fn gateway_arg(mut self, a: impl Into<String>) -> Self {
        self.gateway_args.push(a.into());
        self
    }
    pub fn storage_arg(mut self, a: impl Into<String>) -> Self {
        self.storage_args.push(a.into());
        self
    }

    pub fn open_cache(mut self) -> Self {
        self.open_cache = true;
        self
    }

    /// Whether the storage servers run without the volume secret.
    fn insecure(&self) -> bool {
        self.storage_args.iter().any(|a| a == "--insecure")
    }

    pub fn start(self) -> Cluster {
        Cluster::start(self)
    }
}

/// One child process with a ready file.
pub struct Daemon {
    pub name: String,
    program: OsString,
    args: Vec<OsString>,
    ready: Option<PathBuf>,
    /// memcached: ready when this address accepts
    port_probe: Option<String>,
    pub log: PathBuf,
    child: Option<Child>,
    /// the ready file's JSON (`addr`, `metrics`, …)
    pub info: Value,
}

impl Daemon {
    /// Start and wait until ready.
    pub fn start(name: &str, program: impl Into<OsString>, args: Vec<OsString>, ready: Option<PathBuf>, logs: &Path) -> Daemon {
        let mut d = Daemon {
            name: name.into(),
            program: program.into(),
            args,
            ready,
            port_probe: None,
            log: logs.join(format!("{name}.log")),
            child: None,
            info: Value::Null,
        };
        d.spawn_and_wait();
        d
    }

    fn spawn_and_wait(&mut self) {
        if let Some(r) = &self.ready {
            let _ = std::fs::remove_file(r);
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("log file");
        let child = Command::new(&self.program)
            .args(&self.args)
            .env("IMCA_LOG", std::env::var("IMCA_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.name));
        self.child = Some(child);
        let start = Instant::now();
        loop {
            if let Some(r) = &self.ready {
                if let Ok(text) = std::fs::read(r) {
                    self.info = serde_json::from_slice(&text).expect("ready file is JSON");
                    return;
                }
            }
            if let Some(addr) = &self.port_probe {
                if std::net::TcpStream::connect(addr).is_ok() {
                    self.info = serde_json::json!({ "addr": addr, "metrics": null });
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("{} exited while starting ({status}); log:\n{}", self.name, self.log_tail(30));
            }
            assert!(start.elapsed() < START_DEADLINE, "{} not ready after {START_DEADLINE:?}; log:\n{}", self.name, self.log_tail(30));
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `host:port` from the ready file.
    pub fn addr(&self) -> String {
        self.info["addr"].as_str().unwrap_or_default().to_string()
    }

    pub fn metrics_url(&self) -> Option<String> {
        self.info["metrics"].as_str().map(String::from)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// The last `n` lines of the daemon's log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Send a signal (e.g. `libc::SIGSTOP` to make a server hang).
    pub fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, sig) };
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns whether it exited by itself.
    pub fn stop_within(&mut self, grace: Duration) -> bool {
        let Some(mut c) = self.child.take() else { return true };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < grace {
            if let Ok(Some(_)) = c.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        let _ = c.wait();
        false
    }

    pub fn stop(&mut self) -> bool {
        self.stop_within(Duration::from_secs(20))
    }

    /// Start again with the same arguments (a storage server keeps its
    /// address and export) and wait until ready.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn_and_wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How much of each daemon's log a failed test prints.
const LOG_TAIL_ON_FAILURE: usize = 25;

/// A gateway and where it is mounted.
pub struct Gateway {
    pub daemon: Daemon,
    pub mount: PathBuf,
}

impl Gateway {
    pub fn admin_url(&self) -> Option<String> {
        self.daemon.info["admin"].as_str().map(String::from)
    }

    /// The admin token file named in the ready file.
    pub fn admin_token_file(&self) -> Option<PathBuf> {
        self.daemon.info["admin_token_file"].as_str().map(PathBuf::from)
    }

    /// The admin token (changes need it).
    pub fn admin_token(&self) -> Option<String> {
        let f = self.admin_token_file()?;
        Some(std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display())).trim().to_string())
    }

    /// A client of this gateway's admin API that holds its token.
    pub fn admin(&self) -> admin::client::Client {
        let url = self.admin_url().expect("the gateway serves its admin API (--admin)");
        admin::client::Client::new(&url, self.admin_token()).expect("admin URL")
    }

    /// SIGTERM: the gateway unmounts and exits. Panics if it does not.
    pub fn unmount(&mut self) {
        assert!(self.daemon.stop(), "gateway did not stop on SIGTERM; log:\n{}", self.daemon.log_tail(30));
    }
}

pub struct Cluster {
    pub spec: ClusterSpec,
    pub dir: tempfile::TempDir,
    pub storage: Vec<Daemon>,
    pub cache: Vec<Daemon>,
    pub gateways: Vec<Gateway>,
}

impl Cluster {
    pub fn start(spec: ClusterSpec) -> Cluster {
        let dir = tempfile::Builder::new().prefix("imca-test-").tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("logs")).expect("logs dir");
        let mut c = Cluster { spec: spec.clone(), dir, storage: Vec::new(), cache: Vec::new(), gateways: Vec::new() };
        // The volume secret, made as an operator would (credentials are on,
        // as by default, in every test that does not ask for --insecure).
        let out = std::process::Command::new(imca_bin())
            .args(["secret", "new"])
            .arg(c.secret_file())
            .output()
            .expect("imca secret new");
        assert!(out.status.success(), "imca secret new: {}", String::from_utf8_lossy(&out.stderr));
        for i in 0..spec.storage {
            c.start_storage(i);
        }
        for i in 0..match spec.cache {
            Cache::None => 0,
            Cache::Imca(n) | Cache::Memcached(n) => n,
        } {
            c.start_cache(i);
        }
        for _ in 0..spec.gateways {
            c.add_gateway(&[]);
        }
        c
    }

    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn ready(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.ready"))
    }

    /// Storage server `i`'s export directory.
    pub fn export(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("storage-{i}"))
    }

    fn start_storage(&mut self, i: usize) {
        let export = self.export(i);
        std::fs::create_dir_all(&export).expect("export dir");
        let name = format!("storage-{i}");
        let ready = self.ready(&name);
        let mut args: Vec<OsString> = vec!["storage".into(), "--export".into(), export.into()];
        args.extend(["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--ready-file"].map(OsString::from));
        args.push(ready.clone().into());
        args.extend(self.spec.storage_args.iter().map(OsString::from));
        if self.spec.open_cache {
            args.push("--cache-allow-open-nodes".into());
        }
        if !args.iter().any(|a| a == "--insecure") {
            args.extend(["--secret-file".into(), self.secret_file().into()]);
        }
        let mut d = Daemon::start(&name, imca_bin(), args, Some(ready), &self.logs());
        // A restart must come back on the same address.
        let addr = d.addr();
        if let Some(pos) = d.args.iter().position(|a| a == "127.0.0.1:0") {
            d.args[pos] = addr.into();
        }
        self.storage.push(d);
    }

    fn start_cache(&mut self, i: usize) {
        let name = format!("cache-{i}");
        let d = match self.spec.cache {
            Cache::Memcached(_) => {
                require_tool("memcached", "memcached");
                let port = testkit_procs::free_port();
                let mut args: Vec<OsString> =
                    ["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", "64"].map(OsString::from).to_vec();
                // SAFETY: no preconditions.
                if unsafe { libc::geteuid() } == 0 {
                    args.extend(["-u", "root"].map(OsString::from));
                }
                if let Some(f) = self.node_login() {
                    args.extend(["-Y".into(), f.into()]);
                }
                let mut d = Daemon {
                    name: name.clone(),
                    program: "memcached".into(),
                    args,
                    ready: None,
                    port_probe: Some(format!("127.0.0.1:{port}")),
                    log: self.logs().join(format!("{name}.log")),
                    child: None,
                    info: Value::Null,
                };
                d.spawn_and_wait();
                d
            }
            _ => {
                let ready = self.ready(&name);
                let mut args: Vec<OsString> =
                    ["cache-node", "-l", "127.0.0.1", "-p", "0", "-m", "64", "--metrics", "127.0.0.1:0", "--ready-file"]
                        .map(OsString::from)
                        .to_vec();
                args.push(ready.clone().into());
                if let Some(f) = self.node_login() {
                    args.extend(["-Y".into(), f.into()]);
                }
                let mut d = Daemon::start(&name, imca_bin(), args, Some(ready), &self.logs());
                let addr = d.addr();
                let port = addr.rsplit(':').next().unwrap_or("0").to_string();
                if let Some(pos) = d.args.iter().position(|a| a == "0") {
                    d.args[pos] = port.into();
                }
                d
            }
        };
        self.cache.push(d);
    }

    /// The nodes' `-Y` file, made from the volume secret as an operator
    /// would (`imca secret cache-auth`); `None` when the nodes run open
    /// (`open_cache`, or `--insecure` servers that hold no secret).
    fn node_login(&self) -> Option<PathBuf> {
        if self.spec.open_cache || self.spec.insecure() {
            return None;
        }
        let path = self.cache_auth_file();
        if !path.exists() {
            let out = std::process::Command::new(imca_bin())
                .args(["secret", "cache-auth", "--secret-file"])
                .arg(self.secret_file())
                .arg(&path)
                .output()
                .expect("imca secret cache-auth");
            assert!(out.status.success(), "imca secret cache-auth: {}", String::from_utf8_lossy(&out.stderr));
        }
        Some(path)
    }

    /// The cache nodes' login file (`user:password`, mode 0600).
    pub fn cache_auth_file(&self) -> PathBuf {
        self.dir.path().join("cache-auth")
    }

    pub fn storage_addrs(&self) -> Vec<String> {
        self.storage.iter().map(Daemon::addr).collect()
    }

    pub fn cache_addrs(&self) -> Vec<String> {
        self.cache.iter().map(Daemon::addr).collect()
    }

    /// Start one more gateway on the same servers; returns its index.
    pub fn add_gateway(&mut self, extra: &[&str]) -> usize {
        let i = self.gateways.len();
        let mount = self.dir.path().join(format!("mnt-{i}"));
        std::fs::create_dir_all(&mount).expect("mount dir");
        let name = format!("gateway-{i}");
        let ready = self.ready(&name);
        let mut args: Vec<OsString> = vec!["mount".into(), "--storage-servers".into(), self.storage_addrs().join(",").into()];
        if !self.cache.is_empty() {
            args.extend(["--cache-nodes".into(), self.cache_addrs().join(",").into()]);
        }
        if let Some(u) = self.spec.stripe_unit {
            args.extend(["--stripe-unit".into(), u.to_string().into()]);
        }
        if let Some(t) = self.spec.timeout {
            args.extend(["--timeout".into(), t.to_string().into()]);
        }
        if !self.spec.kernel_cache {
            args.push("--kernel-cache=off".into());
        }
        args.extend(["--metrics", "127.0.0.1:0", "--ready-file"].map(OsString::from));
        args.push(ready.clone().into());
        args.extend(self.spec.gateway_args.iter().map(OsString::from));
        args.extend(extra.iter().map(OsString::from));
        if self.spec.open_cache {
            args.push("--cache-allow-open-nodes".into());
        }
        // An admin API takes changes only with a token: one per cluster, as
        // `imca up` does, unless the test names its own.
        let has = |args: &[OsString], flag: &str| args.iter().any(|a| a == flag);
        if has(&args, "--admin") && !has(&args, "--admin-token-file") {
            args.extend(["--admin-token-file".into(), self.admin_token_file().into()]);
        }
        let needs_secret = !has(&args, "--insecure") && !has(&args, "--secret-file");
        if needs_secret {
            args.extend(["--secret-file".into(), self.secret_file().into()]);
        }
        args.push(mount.clone().into());
        let daemon = Daemon::start(&name, imca_bin(), args, Some(ready), &self.logs());
        self.gateways.push(Gateway { daemon, mount });
        i
    }

    /// The volume secret every daemon of the cluster is given (mode 0600).
    pub fn secret_file(&self) -> PathBuf {
        self.dir.path().join("volume.secret")
    }

    /// The admin token file the cluster's gateways share (created by the
    /// first gateway started with `--admin`, mode 0600).
    pub fn admin_token_file(&self) -> PathBuf {
        self.dir.path().join("admin.token")
    }

    /// Gateway 0's mount point.
    pub fn mount(&self) -> &Path {
        &self.gateways[0].mount
    }

    /// A path inside gateway 0's mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount().join(rel)
    }

    /// A path inside gateway `g`'s mount.
    pub fn path_at(&self, g: usize, rel: &str) -> PathBuf {
        self.gateways[g].mount.join(rel)
    }

    /// Change the volume config through gateway 0's admin API (every
    /// gateway started with `--admin`) and wait until every gateway shows
    /// each value of `body` (they follow within a lease).
    pub fn set_volume_config(&self, body: serde_json::Value) {
        let r: Result<serde_json::Value, _> = self.gateways[0].admin().send("PUT", "/api/v1/config", &body);
        r.unwrap_or_else(|e| panic!("PUT /api/v1/config {body}: {e}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for (i, g) in self.gateways.iter().enumerate() {
            loop {
                let now: serde_json::Value = g.admin().get("/api/v1/config").unwrap_or_default();
                let shows = body.as_object().expect("a JSON object").iter().all(|(k, v)| now.get(k).or_else(|| now["config"].get(k)) == Some(v));
                if shows {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "gateway {i} does not show {body} after 10 s: {now}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Every `/metrics` URL in the cluster.
    pub fn metrics_urls(&self) -> Vec<String> {
        self.storage
            .iter()
            .chain(&self.cache)
            .chain(self.gateways.iter().map(|g| &g.daemon))
            .filter_map(Daemon::metrics_url)
            .collect()
    }
}

/// Unmount if still mounted (a gateway that died or hung).
pub fn force_unmount(mount: &Path) {
    let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(mount).stderr(Stdio::null()).status();
    let _ = Command::new("umount").arg("-l").arg(mount).stderr(Stdio::null()).status();
}

fn mounted(mount: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    let m = mount.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*m))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A test that failed says what every daemon said last: the
        // temporary directory with the logs goes with the cluster.
        if std::thread::panicking() {
            let daemons = self.gateways.iter().map(|g| &g.daemon).chain(&self.storage).chain(&self.cache);
            for d in daemons {
                eprintln!("--- {} (last lines of its log) ---\n{}", d.name, d.log_tail(LOG_TAIL_ON_FAILURE));
            }
            // (whole logs where asked: IMCA_TEST_KEEP_LOGS=DIR)
            if let Some(keep) = std::env::var_os("IMCA_TEST_KEEP_LOGS") {
                let to = Path::new(&keep).join(self.dir.path().file_name().unwrap_or_default());
                let copied = std::fs::create_dir_all(&to).and_then(|()| {
                    std::fs::read_dir(self.logs())?.try_for_each(|e| {
                        let e = e?;
                        std::fs::copy(e.path(), to.join(e.file_name())).map(drop)
                    })
                });
                eprintln!("logs kept in {}: {copied:?}", to.display());
            }
        }
        // Gateways first: they unmount on SIGTERM. Then make sure nothing is
        // left mounted before the temporary directory is removed.
        for g in &mut self.gateways {
            g.daemon.stop_within(Duration::from_secs(10));
            if mounted(&g.mount) {
                force_unmount(&g.mount);
            }
        }
        for d in self.cache.iter_mut().chain(self.storage.iter_mut()) {
            d.kill();
        }
    }
}

/// GET a URL over plain HTTP/1.1 (for /metrics and the admin API).
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http:// URL");
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let mut s = std::net::TcpStream::connect(host).expect("connect");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or(out)
}

/// The errno of an io::Error (panics on a non-OS error).
pub fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or_else(|| panic!("not an OS error: {e}"))
}

/// Assert that `r` failed with `expected` errno.
#[track_caller]
pub fn assert_errno<T: std::fmt::Debug>(r: std::io::Result<T>, expected: i32) {
    match r {
        Ok(v) => panic!("expected errno {expected} ({}), got Ok({v:?})", std::io::Error::from_raw_os_error(expected)),
        Err(e) => assert_eq!(errno(&e), expected, "expected {}, got {e}", std::io::Error::from_raw_os_error(expected)),
    }
}

/// Every object under an export (IMCa's own `.imca` aside): kind and id.
pub fn export_tree(root: &Path) -> std::collections::BTreeMap<String, (char, String)> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".imca" {
                continue;
            }
            let t = e.file_type().unwrap();
            let kind = if t.is_dir() {
                'd'
            } else if t.is_file() {
                'f'
            } else {
                'o'
            };
            out.insert(rel, (kind, fid_of(&p)));
            if t.is_dir() {
                todo.push(p);
            }
        }
    }
    out
}

pub fn fid_of(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new("user.imca.fid").unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid C strings and a buffer of the given length.
    let len = unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(len > 0, "no id on {}", p.display());
    String::from_utf8_lossy(&buf[..len as usize]).into_owned()
}

/// `getxattr` of a path, as text (e.g. `user.imca.fid` in an export).
pub fn xattr(path: &Path, name: &str) -> String {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = [0u8; 256];
    // SAFETY: valid C strings and a buffer of the length given.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(len > 0, "getxattr {name} on {}: {}", path.display(), std::io::Error::last_os_error());
    String::from_utf8(buf[..len as usize].to_vec()).unwrap()
}

/// The bank keys of the volume, derived as anyone who can read a storage
/// server's export could (its name, epoch and block size).
pub fn bank_keys(c: &Cluster) -> cache_bank::Keys {
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c.export(0).join(".imca/volume.json")).unwrap()).unwrap();
    cache_bank::Keys::new(
        config["volume"].as_str().unwrap(),
        config["epoch"].as_u64().unwrap(),
        config["block_size"].as_u64().unwrap() as u32,
    )
}
