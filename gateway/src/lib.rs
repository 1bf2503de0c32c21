//! # gateway — `imca mount`: the volume as a local file system
//!
//! ```text
//!  application ── syscalls ──> kernel FUSE ──/dev/fuse (one cloned fd per thread)──┐
//!                                                                                  v
//!  fuse::GatewayFs ─ task per request ─> coherence → io-stats → CMCache → stripe → protocol-client × S
//!   (the FUSE bridge)  ◄── kernel notifications ──┘   ▲                                 (wire RPC to `imca storage`)
//!                                                      └──── upcalls: the servers' callbacks (`upcalls`)
//!  daemon::serve_metrics: /metrics from the gateway's registry (io-stats,
//!  CMCache, the bank client, the config gauges); the admin API when `--admin` is given
//! ```
//!
//! Thread/task model: a few fuser threads read requests from the kernel and
//! run each one until it first waits on the network (a request the gateway
//! answers itself never leaves its thread); it then parks as a task, owning
//! its reply, and the tokio runtime finishes it when its answer arrives, so
//! a slow request never blocks the others (`fuse::first_poll`). The kernel caches entries, attributes
//! and pages under the storage servers' leases; a change made through
//! another gateway is called back to this one (an upcall through the graph
//! to the `coherence` translator) before it is acknowledged, so several gateways on the same servers stay
//! coherent. `--kernel-cache off` caches nothing (TTL 0).
//!
//! The skeleton (signals, drain, ready file, `/metrics`) is the `daemon`
//! crate's; one `prometheus::Registry` per gateway is passed to every part
//! that registers metrics.

pub mod admin;
pub mod fuse;
pub mod graph;
pub mod mount;
mod storage;
pub mod upcalls;
pub use stripe;

use anyhow::Context;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// Command-line arguments of `imca mount`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Storage servers (host:port, comma-separated). Their order is the stripe
    /// layout: every gateway of a volume must list them in the same order.
    #[arg(long, value_delimiter = ',', required = true)]
    pub storage_servers: Vec<String>,
    /// Cache nodes of the bank (host:port, comma-separated); none = no cache.
    #[arg(long, value_delimiter = ',')]
    pub cache_nodes: Vec<String>,
    /// Serve the admin API on this address (e.g. 127.0.0.1:0).
    #[arg(long)]
    pub admin: Option<String>,
    /// File holding the admin API's bearer token, created with a fresh one
    /// (mode 0600) if missing (default: $IMCA_ADMIN_TOKEN). Changes through
    /// the admin API always need it; without one the API is read-only, and
    /// a non-loopback --admin address is refused.
    #[arg(long, value_name = "FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Stripe unit in bytes (suffixes K, M accepted); a power of two ≥ 4K.
    #[arg(long, default_value = "128K", value_parser = parse_size)]
    pub stripe_unit: u64,
    /// No operation waits longer than this many seconds for the storage
    /// servers (it fails with EIO); keep it above 3 for blocking locks.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Let the kernel cache entries, attributes and pages under the storage
    /// servers' leases and callbacks (`on`), or nothing (`off`).
    #[arg(long, value_name = "on|off", default_value = "on", num_args = 0..=1, default_missing_value = "on")]
    pub kernel_cache: fuse::KernelCacheMode,
    /// After this many lookups in one directory reached the storage servers,
    /// list it ahead of the walk (stat-ahead; 0: never).
    #[arg(long, value_name = "MISSES", default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub stat_ahead: u64,
    // Off by default, as in GlusterFS (`--selinux`) and NFS (labeled NFS
    // is opt-in): a label a storage host gave a file means nothing to a
    // client's policy, and `ls -l` asks for the label of every file it
    // lists, a round trip each. Off, the gateway answers EOPNOTSUPP itself
    // (`ls` then stops asking) and leaves the name out of listings.
    /// Pass the storage hosts' SELinux labels (`security.selinux`) through.
    #[arg(long)]
    pub selinux: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    pub metrics: Option<String>,
    /// Once the mount is live, write {"mount", "addr", "admin",
    /// "admin_token_file", "metrics", "pid"} here.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    // Each runs the requests it reads until they first wait on the network.
    // Only one waits for the kernel's next request unless requests queue
    // up, so one process's requests in a row stay on one warm thread.
    /// FUSE reader threads (default: number of CPUs, 2..=8).
    #[arg(long)]
    pub fuse_threads: Option<usize>,
    // More of them wake each other more often than they help
    // (docs/benchmarks/archive/issue-12-kernel-caching.md).
    /// Runtime threads, which finish requests once their replies arrive
    /// (default: half the CPUs, 1..=8).
    #[arg(long, env = "IMCA_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: Option<u16>,
    /// Transport to the storage servers and the cache nodes: tcp, rdma (needs
    /// the `rdma` build feature and a device) or auto (rdma when possible, logged).
    #[arg(long, value_name = "KIND", default_value = "tcp")]
    pub transport: transport::select::TransportKind,
    /// The volume secret (--secret-file FILE, or --insecure).
    #[command(flatten)]
    pub credentials: daemon::Credentials,
    /// Reach the storage servers over TLS 1.3, trusting certificates signed
    /// by this CA (PEM; or a server's own certificate). For servers started
    /// with --tls-cert.
    #[arg(long, value_name = "FILE", env = "IMCA_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Cache bank values and node login (--cache-encrypt, --cache-auth-file).
    #[command(flatten)]
    pub cache: cache_bank::BankArgs,
    /// Where to mount.
    pub mountpoint: PathBuf,
}

/// "131072", "128K", "1M" → bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1024),
        Some((i, 'm' | 'M')) => (&s[..i], 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|e| format!("bad size {s:?}: {e}"))
}

/// `p` made absolute against the current directory (for the ready file,
/// read from elsewhere).
fn absolute(p: &std::path::Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
}

/// How long the side servers (`/metrics`) get to finish after the unmount.
const DRAIN: Duration = Duration::from_secs(5);

/// Entry point used by the `imca` binary; builds its own runtime.
pub fn main(args: Args) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers.map_or_else(|| (cpus() / 2).clamp(1, 8), usize::from))
        .thread_name("gateway")
        .enable_all()
        .build()?;
    rt.block_on(run(args, daemon::signals()))
}

/// Mount, serve until `shutdown` resolves (or the mount is removed from
/// outside), then unmount.
pub async fn run(args: Args, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let mountpoint = mount::prepare(&args.mountpoint)?;
    let timeout = Duration::from_secs_f64(args.timeout.max(0.001));
    if timeout <= wire::LOCK_HOLD {
        // A server holds a blocking lock request this long before "ask
        // again": a shorter timeout fails a contended F_SETLKW with EIO.
        tracing::warn!(timeout = ?timeout, "--timeout is not above the servers' hold of a blocking lock request \
            ({:?}): a blocking fcntl/flock that waits that long fails with EIO", wire::LOCK_HOLD);
    }
    let rdma = transport::select::use_rdma(args.transport, "gateway").map_err(anyhow::Error::msg)?;
    let secret = args.credentials.load()?;
    let rpc_key = secret.as_ref().map(|s| s.key(secret::Purpose::RpcHandshake));
    let tls = args.tls_ca.as_deref().map(transport::tcp::tls::ClientTls::from_ca_file).transpose().map_err(anyhow::Error::msg)?;
    if tls.is_some() && rdma {
        anyhow::bail!("--tls-ca applies to TCP; RDMA connections are authenticated, not encrypted (use --transport tcp)");
    }
    // Who this gateway is to the servers (their callbacks skip the asker).
    let session = rand::random::<u64>().max(1);
    let health = protocol_client::HealthMetrics::new();
    let lease_client = storage::lease_client(&args.storage_servers[0], timeout, rdma, rpc_key.clone(), tls.clone());
    let clients = storage::connect(&args.storage_servers, timeout, rdma, rpc_key, tls, session, health.clone()).await?;

    // One registry for everything this gateway runs (see the daemon crate).
    let registry = prometheus::Registry::new();
    health.register(&registry)?;
    // CMCache's bank (built from the volume config) reaches the cache nodes over RDMA too.
    let bank = args.cache.apply(cache_bank::BankOptions {
        rdma,
        metrics: cache_bank::BankMetrics::register(&registry)?,
        // every value MAC-checked under the volume secret (none: --insecure)
        value_key: secret.as_ref().map(|s| s.key(secret::Purpose::BankValues)),
        // the volume's own login to the nodes (none: --insecure)
        node_credentials: secret.as_ref().map(cache_bank::Credentials::of_volume),
        ..Default::default()
    })?;
    let bank_allows_open = bank.allow_open_nodes;
    let drain = daemon::Drain::new();
    // The volume's cache config, held under a lease (volume::lease): CMCache
    // uses it for keys and bypasses the bank while it is withdrawn.
    let servers = std::sync::Arc::new(admin::StorageServers::new(clients.clone(), args.storage_servers.clone()).with_lease_client(lease_client));
    // `--cache-nodes` names the bank: install it as an admin change would be.
    if !args.cache_nodes.is_empty() {
        volume::change::install_nodes(&*servers, &args.cache_nodes).await.context("installing --cache-nodes")?;
    }
    let lease = admin::start_lease(servers.clone(), &registry, drain.stopped()).await?;
    let graph = std::sync::Arc::new(graph::build(
        &clients,
        &graph::GraphConfig {
            stripe_unit: args.stripe_unit,
            cache_nodes: args.cache_nodes.clone(),
            volume_config: Some(lease.subscribe()),
            bank,
            kernel_cache: args.kernel_cache,
            stat_ahead: args.stat_ahead,
        },
        &registry,
    )?);
    tracing::info!(pipeline = ?graph.names(), "client graph built");
    // Names an operation left differing between the servers are healed in
    // the background once they answer (stripe's heal index).
    tokio::spawn(graph.stripe.clone().run_healer(drain.stopped()));
    let metrics_url = match &args.metrics {
        Some(addr) => Some(daemon::metrics_url(daemon::spawn_metrics(addr, registry.clone(), || {}, drain.token()).await?)),
        None => None,
    };
    let admin_url =
        start_admin(&args, &graph, servers, lease, &registry, bank_allows_open, drain.stopped()).await?;

    // The polls hold this gateway's leases: the kernel may cache under them
    // (mode on), and the servers keep its locks while they last (any mode).
    // Their callbacks travel up the graph (`upcalls`).
    for (i, c) in clients.iter().enumerate() {
        tokio::spawn(upcalls::poll_loop(i, c.clone(), graph.clone(), drain.stopped()));
    }
    // What the kernel is about to cache is first held on every server.
    tokio::spawn(graph.coherence.run_holds(drain.stopped()));
    let releases = tokio::spawn(graph.coherence.run_releases(drain.stopped()));
    let fs = fuse::GatewayFs::new(tokio::runtime::Handle::current(), graph.coherence.clone()).selinux(args.selinux);
    let threads = args.fuse_threads.unwrap_or_else(|| cpus().clamp(2, 8));
    let mp = mountpoint.clone();
    let mounted = tokio::task::spawn_blocking(move || mount::Mounted::mount(fs, &mp, threads)).await??;
    if let Some(n) = mounted.notifier() {
        graph.coherence.set_notifier(Box::new(fuse::Kernel(n)));
    }
    tracing::info!(mount = %mountpoint.display(), servers = ?args.storage_servers, "mounted");

    if let Some(path) = &args.ready_file {
        let addr = admin_url.as_deref().map(|u| u.trim_start_matches("http://").to_string());
        daemon::write_ready_file(
            path,
            &serde_json::json!({
                "mount": mountpoint,
                "addr": addr,
                "admin": admin_url,
                // where the token is (never the token): `imca ctl --token-file`
                "admin_token_file": admin_url.as_ref().and(args.admin_token_file.as_deref()).map(absolute),
                "metrics": metrics_url,
                "pid": std::process::id(),
            }),
        )?;
    }

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {
                if mounted.is_finished() {
                    tracing::warn!("the mount was removed from outside; stopping");
                    break;
                }
            }
        }
    }
    let result = tokio::task::spawn_blocking(move || mounted.unmount()).await?;
    drain.drain(DRAIN).await;
    // the releases of the last closes go before the connections do
    let _ = tokio::time::timeout(DRAIN, releases).await;
    tracing::info!(mount = %mountpoint.display(), "unmounted");
    result
}

/// The admin API (crate `admin`): started on `args.admin` with a backend
/// built from `graph` and `servers` (the protocol-clients, in stripe order:
/// fetch/set each server's volume config, watch epochs), stopped when
/// `stopped` resolves. Returns its base URL ("http://127.0.0.1:PORT"), or
/// `None` without `--admin`.
async fn start_admin(
    args: &Args,
    graph: &graph::Graph,
    servers: std::sync::Arc<admin::StorageServers>,
    lease: volume::lease::ConfigLease,
    registry: &prometheus::Registry,
    open_cache_nodes_allowed: bool,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Option<String>> {
    let Some(addr) = &args.admin else { return Ok(None) };
    let auth = ::admin::Auth::load(args.admin_token_file.as_deref())?;
    let backend = std::sync::Arc::new(admin::GatewayAdmin {
        servers,
        lease,
        pipeline: graph.names(),
        mountpoint: Some(args.mountpoint.clone()),
        stripe_unit: args.stripe_unit as u32,
        started: std::time::Instant::now(),
        registry: registry.clone(),
        open_cache_nodes_allowed,
    });
    let url = admin::serve(addr, auth, backend, stopped).await?;
    tracing::info!(%url, "admin API up");
    Ok(Some(url))
}
// ────────────────────────────────────────────────────────────────────────────
