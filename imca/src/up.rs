//! `imca up`: a whole local cluster in one command.
//!
//! Starts S storage servers (exports `DIR/storage-<i>`), N cache nodes
//! (`imca cache-node`, or Debian's memcached with `--memcached`) and one
//! gateway mounted at `--mount`, all as child processes of this binary. The
//! gateway's admin API takes changes only with the token in
//! `DIR/admin.token` (made on the first run, mode 0600, kept after); the
//! cluster file names that file, never the token. Each
//! child announces readiness through its `--ready-file` (memcached, which has
//! none, through its TCP port); nothing here sleeps to wait. Once the mount
//! is live the endpoints are printed and written to `DIR/cluster.json`. On
//! SIGINT/SIGTERM (or when a child dies) the gateway unmounts first, then the
//! rest stop. Children run in their own process group (a terminal's Ctrl-C
//! reaches only us, so we decide the order) and get SIGTERM if we die
//! (PR_SET_PDEATHSIG).

use anyhow::{bail, Context};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where the cluster keeps its data (storage exports), logs and cluster.json.
    #[arg(long, default_value = "imca-data")]
    pub dir: PathBuf,
    /// Where to mount the volume.
    #[arg(long, default_value = "imca-mnt")]
    pub mount: PathBuf,
    /// Number of storage servers.
    #[arg(long, default_value_t = 2)]
    pub storage_servers: usize,
    /// Number of cache nodes.
    #[arg(long, default_value_t = 2)]
    pub cache_nodes: usize,
    /// Start no cache nodes (same as --cache-nodes 0).
    #[arg(long)]
    pub no_cache: bool,
    /// Use Debian's memcached for the cache nodes instead of `imca cache-node`.
    #[arg(long)]
    pub memcached: bool,
    /// Memory per cache node, in megabytes.
    #[arg(long, default_value_t = 64)]
    pub cache_mb: u32,
    /// Use ports from here up (storage servers, cache nodes, admin API, then
    /// metrics) instead of free ones.
    #[arg(long)]
    pub base_port: Option<u16>,
    /// Stripe unit passed to the gateway (e.g. 128K).
    #[arg(long)]
    pub stripe_unit: Option<String>,
    /// How long to wait for each process to become ready, in seconds.
    #[arg(long, default_value_t = 60)]
    pub start_timeout: u64,
    /// Transport of the storage servers, the cache nodes and the gateway
    /// (storage RPC and cache bank): tcp, rdma (needs the `rdma` build
    /// feature and a device) or auto. Memcached nodes are reached over TCP.
    #[arg(long, value_name = "KIND", default_value = "tcp")]
    pub transport: transport::select::TransportKind,
    /// With --transport rdma|auto: the IP of the RDMA-capable interface the
    /// storage servers and cache nodes listen on (rdma_cm cannot use loopback).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub rdma_ip: String,
    /// Run the storage servers and the gateway without the volume secret
    /// (no authentication, no bank-value MACs). Only for measuring what
    /// authentication costs; any local user can then read and write every file.
    #[arg(long)]
    pub insecure: bool,
    /// Start the cache nodes without a login and let the volume use them.
    /// By default they require the login derived from the volume secret
    /// (DIR/cache-auth, their `-Y` file), so only the volume writes its bank.
    #[arg(long)]
    pub cache_open: bool,
    /// Passed to the gateway: `on` (default) lets its kernel cache entries,
    /// attributes and pages under the servers' leases; `off` caches nothing
    /// in the kernel (every request reaches the gateway).
    #[arg(long, value_name = "on|off", default_value = "on")]
    pub kernel_cache: gateway::fuse::KernelCacheMode,
    /// Passed to the storage servers: how long a gateway's kernel may use
    /// what it cached without hearing from them (seconds; their default
    /// when not given).
    #[arg(long, value_name = "SECS")]
    pub kernel_lease: Option<f64>,
}

/// The volume secret's file in the data dir (kept across runs: the
/// exports and the secret belong together).
const SECRET_FILE: &str = "volume.secret";

/// The admin token's file in the data dir.
const ADMIN_TOKEN_FILE: &str = "admin.token";

pub fn main(args: Args) -> anyhow::Result<()> {
    // One thread: children are forked from it, so PR_SET_PDEATHSIG (which
    // follows the forking *thread*) fires only when the whole process ends.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(up(args))
}

struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

struct Ports {
    base: Option<u16>,
    used: u16,
}

impl Ports {
    /// "127.0.0.1:PORT" from the base, or ":0" (the daemon picks) without one.
    fn next(&mut self) -> String {
        match self.base {
            Some(b) => {
                self.used += 1;
                format!("127.0.0.1:{}", b + self.used - 1)
            }
            None => "127.0.0.1:0".into(),
        }
    }

    /// memcached cannot pick its own port: find a free one.
    fn concrete(&mut self) -> anyhow::Result<u16> {
        match self.base {
            Some(_) => Ok(self.next().rsplit(':').next().unwrap_or("0").parse()?),
            None => Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()),
        }
    }
}

async fn up(args: Args) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the imca binary")?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = args.dir.canonicalize()?;
    let mount = prepare_mount(&args.mount)?;
    let (run, logs) = (dir.join("run"), dir.join("logs"));
    for d in [&run, &logs] {
        std::fs::create_dir_all(d)?;
    }
    let _ = std::fs::remove_file(dir.join("cluster.json"));
    let caches = if args.no_cache { 0 } else { args.cache_nodes };
    if args.storage_servers == 0 {
        bail!("--storage-servers must be at least 1");
    }
    check_layout(&dir, args.storage_servers, args.stripe_unit.as_deref())?;
    let secret_file = dir.join(SECRET_FILE);
    if !args.insecure {
        secret::Secret::load_or_create(&secret_file)?;
    }
    // Both daemons get the same credentials argument.
    let credentials = |cmd: &mut Command| {
        if args.insecure {
            cmd.arg("--insecure");
        } else {
            cmd.arg("--secret-file").arg(&secret_file);
        }
    };
    let deadline = Duration::from_secs(args.start_timeout);
    // The nodes' login, derived from the secret (the daemons derive it by
    // themselves); none with --insecure (no secret) or --cache-open.
    let cache_auth = if args.insecure || args.cache_open { None } else { Some(cache_auth_file(&dir, &secret_file)?) };
    let open_nodes = |cmd: &mut Command| {
        if args.cache_open && !args.insecure {
            cmd.arg("--cache-allow-open-nodes");
        }
    };
    let mut ports = Ports { base: args.base_port, used: 0 };
    let mut procs: Vec<Proc> = Vec::new();
    println!(
        "imca up: {} storage server(s), {} cache node(s){}, 1 gateway; data and logs in {}",
        args.storage_servers,
        caches,
        if args.memcached && caches > 0 { " (memcached)" } else { "" },
        dir.display()
    );

    let result = async {
        // Storage servers, all started at once, then awaited in order.
        let mut storage = Vec::new();
        for i in 0..args.storage_servers {
            let export = dir.join(format!("storage-{i}"));
            std::fs::create_dir_all(&export)?;
            let ready = ready_path(&run, &format!("storage-{i}"));
            let mut cmd = imca(&exe, "storage");
            cmd.arg("--export").arg(&export);
            credentials(&mut cmd);
            let mut listen = ports.next();
            if args.transport != transport::select::TransportKind::Tcp {
                let port = listen.rsplit_once(':').map_or("0", |(_, p)| p).to_string();
                listen = format!("{}:{port}", args.rdma_ip);
            }
            cmd.args(["--transport", &args.transport.to_string()]);
            if let Some(l) = args.kernel_lease {
                cmd.arg(format!("--kernel-lease={l}"));
            }
            cmd.args(["--listen", &listen, "--metrics", "127.0.0.1:0", "--ready-file"]).arg(&ready);
            open_nodes(&mut cmd);
            procs.push(spawn(&format!("storage-{i}"), cmd, &logs)?);
            storage.push((procs.len() - 1, ready, export));
        }
        let mut storage_addrs = Vec::new();
        let mut metrics = Vec::new();
        for (idx, ready, export) in storage {
            let info = wait_ready(&mut procs[idx], &ready, deadline).await?;
            let addr = str_field(&info, "addr")?;
            println!("  {:<10} {:<22} export {}", procs[idx].name, addr, export.display());
            metrics.extend(info["metrics"].as_str().map(String::from));
            storage_addrs.push(addr);
        }

        let mut cache_addrs = Vec::new();
        for i in 0..caches {
            let name = format!("cache-{i}");
            let addr = if args.memcached {
                let port = ports.concrete()?;
                let mut cmd = Command::new("memcached");
                cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-m", &args.cache_mb.to_string()]);
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } == 0 {
                    cmd.args(["-u", "root"]);
                }
                if let Some(f) = &cache_auth {
                    cmd.arg("-Y").arg(f);
                }
                procs.push(spawn(&name, cmd, &logs).context("starting memcached (apt-get install memcached)")?);
                let addr = format!("127.0.0.1:{port}");
                let idx = procs.len() - 1;
                wait_port(&mut procs[idx], &addr, deadline).await?;
                addr
            } else {
                let ready = ready_path(&run, &name);
                let listen = ports.next();
                let (mut host, port) = listen.rsplit_once(':').unwrap_or(("127.0.0.1", "0"));
                let mut cmd = imca(&exe, "cache-node");
                if args.transport != transport::select::TransportKind::Tcp {
                    // TCP and RDMA on one ip:port, which rdma_cm needs off loopback
                    host = &args.rdma_ip;
                    cmd.args(["--transport", &args.transport.to_string()]);
                }
                cmd.args(["-l", host, "-p", port, "-m", &args.cache_mb.to_string()]);
                cmd.args(["--metrics", "127.0.0.1:0", "--ready-file"]).arg(&ready);
                if let Some(f) = &cache_auth {
                    cmd.arg("-Y").arg(f);
                }
                procs.push(spawn(&name, cmd, &logs)?);
                let idx = procs.len() - 1;
                let info = wait_ready(&mut procs[idx], &ready, deadline).await?;
                metrics.extend(info["metrics"].as_str().map(String::from));
                str_field(&info, "addr")?
            };
            println!("  {:<10} {:<22} {}", name, addr, if args.memcached { "memcached" } else { "imca cache-node" });
            cache_addrs.push(addr);
        }

        let ready = ready_path(&run, "gateway");
        let token_file = dir.join(ADMIN_TOKEN_FILE);
        admin::auth::ensure_token_file(&token_file)?;
        let mut cmd = imca(&exe, "mount");
        cmd.arg("--storage-servers").arg(storage_addrs.join(","));
        credentials(&mut cmd);
        cmd.args(["--transport", &args.transport.to_string()]);
        if args.kernel_cache == gateway::fuse::KernelCacheMode::Off {
            cmd.arg("--kernel-cache=off");
        }
        if !cache_addrs.is_empty() {
            cmd.arg("--cache-nodes").arg(cache_addrs.join(","));
        }
        if let Some(u) = &args.stripe_unit {
            cmd.args(["--stripe-unit", u]);
        }
        cmd.args(["--admin", &ports.next()]).arg("--admin-token-file").arg(&token_file);
        open_nodes(&mut cmd);
        cmd.args(["--metrics", "127.0.0.1:0", "--ready-file"]).arg(&ready).arg(&mount);
        procs.push(spawn("gateway", cmd, &logs)?);
        let idx = procs.len() - 1;
        let info = wait_ready(&mut procs[idx], &ready, deadline).await?;
        metrics.extend(info["metrics"].as_str().map(String::from));
        let admin = info["admin"].clone();
        println!("  {:<10} mounted at {}", "gateway", mount.display());
        if let Some(a) = admin.as_str() {
            println!("  {:<10} {a} (changes need the token in {})", "admin", token_file.display());
        }
        match (&cache_auth, caches) {
            (_, 0) => {}
            (Some(f), _) => println!("  {:<10} {} (the cache nodes' -Y file, derived from the secret)", "cache-auth", f.display()),
            (None, _) => println!("  {:<10} NONE: the cache nodes take anyone's reads and writes", "cache-auth"),
        }
        if args.insecure {
            println!("  {:<10} NONE: --insecure (no authentication; any local user can read and write every file)", "secret");
        } else {
            println!("  {:<10} {} (give it to every storage server and gateway of this volume)", "secret", secret_file.display());
        }
        for m in &metrics {
            println!("  {:<10} {m}", "metrics");
        }
        let cluster = json!({
            "mount": mount,
            "admin": admin,
            // the path only: `imca ctl --cluster` reads the token from it
            "admin_token_file": token_file,
            "secret_file": (!args.insecure).then_some(&secret_file),
            "cache_auth_file": cache_auth,
            "storage_servers": storage_addrs,
            "cache_nodes": cache_addrs,
            "metrics": metrics,
        });
        daemon::write_ready_file(&dir.join("cluster.json"), &cluster)?;
        println!("IMCa is up: {} (endpoints in {}). Ctrl-C to stop.", mount.display(), dir.join("cluster.json").display());
        anyhow::Ok(())
    }
    .await;

    let outcome = match result {
        Err(e) => Err(e),
        Ok(()) => wait_until_stopped(&mut procs).await,
    };
    println!("imca up: stopping");
    let _ = std::fs::remove_file(dir.join("cluster.json"));
    stop_all(&mut procs, &mount).await;
    println!("imca up: stopped");
    outcome
}

/// DIR/cache-auth: the nodes' `-Y` file (mode 0600), written on every run
/// from the volume secret, as `imca secret cache-auth` does.
fn cache_auth_file(dir: &Path, secret_file: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("cache-auth");
    let login = cache_bank::Credentials::of_volume(&secret::Secret::load(secret_file)?);
    crate::secret_cmd::write_private(&path, login.auth_file_line().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The stripe layout is fixed by the data already in DIR: the same number of
/// storage servers and stripe unit every time, or the files would be garbled.
fn check_layout(dir: &Path, servers: usize, unit: Option<&str>) -> anyhow::Result<()> {
    let unit = gateway::parse_size(unit.unwrap_or("128K")).map_err(anyhow::Error::msg)?;
    let want = json!({ "storage_servers": servers, "stripe_unit": unit });
    let path = dir.join("layout.json");
    match std::fs::read(&path) {
        Ok(text) => {
            let have: Value = serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))?;
            if have != want {
                bail!(
                    "{} holds a volume striped as {have}, but this run asks for {want};                      use the same --storage-servers/--stripe-unit or another --dir",
                    dir.display()
                );
            }
            Ok(())
        }
        Err(_) => daemon::write_ready_file(&path, &want),
    }
}

fn imca(exe: &Path, sub: &str) -> Command {
    let mut c = Command::new(exe);
    c.arg(sub);
    c
}

fn ready_path(run: &Path, name: &str) -> PathBuf {
    let p = run.join(format!("{name}.ready"));
    let _ = std::fs::remove_file(&p);
    p
}

fn str_field(v: &Value, field: &str) -> anyhow::Result<String> {
    v[field].as_str().map(String::from).with_context(|| format!("ready file lacks \"{field}\": {v}"))
}

/// The mount directory: created if missing; a stale mount (a crashed run) is
/// cleaned; a live one is refused.
fn prepare_mount(path: &Path) -> anyhow::Result<PathBuf> {
    if gateway::mount::is_stale(path) {
        println!("imca up: cleaning a stale mount at {} (left by a crashed run)", path.display());
        gateway::mount::unmount_lazy(path)?;
    }
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
    gateway::mount::prepare(path)
}

fn spawn(name: &str, mut cmd: Command, logs: &Path) -> anyhow::Result<Proc> {
    let log = logs.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    cmd.stdin(std::process::Stdio::null()).stdout(out.try_clone()?).stderr(out).kill_on_drop(true);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // The parent may already be gone (we would never get the signal).
            if libc::getppid() == 1 {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
    Ok(Proc { name: name.into(), child, log })
}

/// The last lines of a child's log, for error messages.
fn log_tail(p: &Proc) -> String {
    let text = std::fs::read_to_string(&p.log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n    ")
}

fn exited(p: &mut Proc) -> anyhow::Result<()> {
    if let Some(status) = p.child.try_wait()? {
        bail!("{} exited ({status}) while starting; its log ({}):\n    {}", p.name, p.log.display(), log_tail(p));
    }
    Ok(())
}

/// Wait for a child's ready file (polled every 10 ms), failing early if it exits.
async fn wait_ready(p: &mut Proc, ready: &Path, deadline: Duration) -> anyhow::Result<Value> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read(ready) {
            return serde_json::from_slice(&text).with_context(|| format!("parsing {}", ready.display()));
        }
        exited(p)?;
        if start.elapsed() > deadline {
            bail!("{} not ready after {deadline:?}; its log ({}):\n    {}", p.name, p.log.display(), log_tail(p));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// memcached has no ready file: it is ready when its port accepts.
async fn wait_port(p: &mut Proc, addr: &str, deadline: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        exited(p)?;
        if start.elapsed() > deadline {
            bail!("{} not listening on {addr} after {deadline:?}", p.name);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Until SIGINT/SIGTERM (Ok) or until a child exits on its own (Err).
async fn wait_until_stopped(procs: &mut [Proc]) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let any_exit = async {
        let waits = procs.iter_mut().map(|p| Box::pin(async move { (p.name.clone(), p.child.wait().await) }));
        futures_select_all(waits.collect()).await
    };
    tokio::select! {
        _ = int.recv() => Ok(()),
        _ = term.recv() => Ok(()),
        (name, status) = any_exit => bail!("{name} exited unexpectedly ({status:?})"),
    }
}

/// The first of several futures to finish (a tiny `select_all`).
async fn futures_select_all<F: std::future::Future + Unpin>(mut futs: Vec<F>) -> F::Output {
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Gateway first (it unmounts), then the others; SIGTERM, then SIGKILL after a grace period.
async fn stop_all(procs: &mut [Proc], mount: &Path) {
    let (gw, rest): (Vec<&mut Proc>, Vec<&mut Proc>) = procs.iter_mut().partition(|p| p.name == "gateway");
    for p in gw {
        stop(p, Duration::from_secs(15)).await;
    }
    if gateway::mount::is_stale(mount) || gateway::mount::is_mount_point(mount) {
        let _ = gateway::mount::unmount_lazy(mount);
    }
    for p in &rest {
        term(p);
    }
    for p in rest {
        stop(p, Duration::from_secs(10)).await;
    }
}

fn term(p: &Proc) {
    if let Some(pid) = p.child.id() {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
}

async fn stop(p: &mut Proc, grace: Duration) {
    if let Ok(Some(_)) = p.child.try_wait() {
        return;
    }
    term(p);
    if tokio::time::timeout(grace, p.child.wait()).await.is_err() {
        eprintln!("imca up: {} did not stop within {grace:?}; killing it", p.name);
        let _ = p.child.kill().await;
    }
}
