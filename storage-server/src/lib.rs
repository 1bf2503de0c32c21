//! # storage-server — `imca storage`, one brick of the volume
//!
//! Exports a directory over the storage RPC. The server graph:
//!
//! ```text
//!  gateway protocol-client ══ TCP (transport::tcp) ══> protocol-server   (decode, metrics, epoch stamp)
//!                                                      -> locks            (getlk/setlk, per gateway session)
//!                                                      -> gateway-opens    (each gateway's opens)
//!                                                      -> upcall           (kernel-cache leases, callbacks)
//!                                                      -> SMCache          (graph::with_smcache)
//!                                                      -> posix            (export dir, fd cache)
//! ```
//!
//! Task model: the TCP server runs one reader and one writer task per
//! connection and one task per request; posix moves every syscall to tokio's
//! blocking pool (bounded by `max_blocking_threads`). The volume's cache
//! config lives in `EXPORT/.imca/volume.json` ([`volume::Volume`]), is
//! changed by compare-and-set over the wire, and its epoch is stamped on
//! every reply.
//!
//! Embedding (tests, `imca up`): [`start`] binds, writes the ready file and
//! returns a [`Server`] handle with the bound addresses; [`run`] is start +
//! wait for a shutdown future; [`main`] adds a runtime and SIGINT/SIGTERM.
//! The skeleton (drain, ready file, `/metrics`, signals) is the `daemon`
//! crate's; one `prometheus::Registry` per server is passed to
//! protocol-server, SMCache and the bank client.

pub mod graph;
pub mod metrics;
pub mod rpc;

use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::task::JoinHandle;

pub use graph::{with_smcache, GraphContext};
pub use volume::Volume;
pub use posix;

/// Command-line arguments of `imca storage`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Directory to export (must exist; IMCa keeps its state in DIR/.imca).
    #[arg(long, value_name = "DIR")]
    pub export: PathBuf,
    /// Address for the storage RPC (port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Serve Prometheus metrics on ADDR at /metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Write {"addr", "metrics", ...} here once listening.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Set the volume's cache-node pool (bumps the epoch when it changes).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub cache_nodes: Option<Vec<String>>,
    /// Set the volume's name (only meaningful before the volume is used).
    #[arg(long, value_name = "NAME")]
    pub volume: Option<String>,
    /// Set the volume's cache block size in bytes (bumps the epoch when it changes).
    #[arg(long, value_name = "BYTES")]
    pub block_size: Option<u32>,
    /// Largest number of data fds kept open.
    #[arg(long, value_name = "N", default_value_t = posix::DEFAULT_FD_CACHE)]
    pub fd_cache: usize,
    // Sockets still on their hello do not take one (they have 64 slots and
    // 5 s of their own).
    /// Largest number of client connections served at once; when every one
    /// is taken, the longest-quiet idle connection makes room for a new one.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// Threads for blocking file-system calls.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub io_threads: usize,
    // More of them wake each other for every request more often than they
    // help (docs/benchmarks/archive/issue-12-kernel-caching.md).
    /// Runtime threads, which serve requests but not blocking calls
    /// (`--io-threads`); default: half the CPUs, 1..=8.
    #[arg(long, value_name = "N", env = "IMCA_STORAGE_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: Option<u16>,
    /// tcp, rdma (also listen for RDMA on the same ip:port, and reach the
    /// cache nodes over RDMA; needs the `rdma` build feature and a device)
    /// or auto (rdma when possible, logged).
    #[arg(long, value_name = "KIND", default_value = "tcp")]
    pub transport: transport::select::TransportKind,
    /// How long a mutation waits for a cache node to confirm its cache
    /// changes before asking the gateways to fence the node (a hung node
    /// then costs this much extra on a write, never an error).
    #[arg(long, value_name = "MS", env = "IMCA_SMCACHE_DEADLINE_MS",
          default_value_t = smcache::DEFAULT_DEADLINE.as_millis() as u64)]
    pub cache_deadline_ms: u64,
    /// Gateways' kernels may cache attributes, entries and pages for this
    /// many seconds after their last lease renewal (0.05..=60). A mutation
    /// waits for every other gateway to drop what it changes, but never
    /// longer than this for one that does not answer (frozen, partitioned).
    #[arg(long, value_name = "SECS", default_value_t = 1.0, value_parser = parse_lease)]
    pub kernel_lease: f64,
    /// After a restart with locks held, grant no new lock for this many
    /// seconds while gateways reclaim theirs (0..=600).
    #[arg(long, value_name = "SECS", default_value_t = locks::recovery::DEFAULT_GRACE.as_secs_f64(), value_parser = parse_grace)]
    pub lock_grace: f64,
    /// The dissertation's "threaded" mode: a write deletes the blocks it
    /// covers before replying and repopulates them afterwards, off the reply path.
    #[arg(long, env = "IMCA_SMCACHE_THREADED", value_parser = clap::builder::FalseyValueParser::new())]
    pub threaded_cache_updates: bool,
    /// Let clients create character and block device nodes in the export
    /// (by default mknod of a device is refused with EPERM, like `nodev`).
    #[arg(long, env = "IMCA_ALLOW_DEVICES", value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_devices: bool,
    /// Keep set-user-id and set-group-id bits that clients set, and let them
    /// set file capabilities (by default the bits are dropped on create,
    /// mkdir, mknod and chmod, like `nosuid`, and `security.capability` is
    /// refused with EPERM).
    #[arg(long, env = "IMCA_ALLOW_SETID", value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_setid: bool,
    /// New objects that a client creates as uid/gid 0 are owned by nobody
    /// (65534), and a chown to uid/gid 0 is refused (NFS `root_squash`).
    #[arg(long, env = "IMCA_ROOT_SQUASH", value_parser = clap::builder::FalseyValueParser::new())]
    pub root_squash: bool,
    /// Storage RPC resource limits (--idle-timeout, --max-frame, --conn-memory, --rpc-memory).
    #[command(flatten)]
    pub rpc: rpc::RpcLimits,
    /// The volume secret (--secret-file FILE, or --insecure).
    #[command(flatten)]
    pub credentials: daemon::Credentials,
    /// Cache bank values and node login (--cache-encrypt, --cache-auth-file).
    #[command(flatten)]
    pub cache: cache_bank::BankArgs,
}

impl Args {
    /// Defaults for an export, listening on 127.0.0.1:0 (tests, `imca up`).
    pub fn new(export: impl Into<PathBuf>) -> Args {
        Args {
            export: export.into(),
            listen: "127.0.0.1:0".into(),
            metrics: None,
            ready_file: None,
            cache_nodes: None,
            volume: None,
            block_size: None,
            fd_cache: posix::DEFAULT_FD_CACHE,
            max_connections: 1024,
            io_threads: 64,
            workers: None,
            transport: Default::default(),
            cache_deadline_ms: smcache::DEFAULT_DEADLINE.as_millis() as u64,
            kernel_lease: 1.0,
            lock_grace: locks::recovery::DEFAULT_GRACE.as_secs_f64(),
            threaded_cache_updates: false,
            allow_devices: false,
            allow_setid: false,
            root_squash: false,
            rpc: Default::default(),
            credentials: Default::default(),
            cache: Default::default(),
        }
    }

    /// What clients may put in the export (see `posix::ExportPolicy`).
    pub fn export_policy(&self) -> posix::ExportPolicy {
        posix::ExportPolicy { allow_devices: self.allow_devices, allow_setid: self.allow_setid, root_squash: self.root_squash }
    }
}

/// How long a graceful shutdown waits for in-flight requests: past the
/// gateways' storage RPC timeout (10 s by default) they have answered EIO
/// anyway, so waiting longer helps nobody.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// A running storage server.
pub struct Server {
    pub addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
    pub volume: Arc<Volume>,
    /// what `/metrics` serves: this server's, its protocol-server's,
    /// SMCache's and its bank client's metrics
    pub registry: prometheus::Registry,
    /// the storage RPC server's connection and memory counters
    pub rpc_stats: Arc<transport::tcp::ServerStats>,
    drain: daemon::Drain,
    task: JoinHandle<()>,
}

impl Server {
    /// Stop accepting, let in-flight requests finish (at most [`DRAIN`]), close.
    pub async fn shutdown(self) {
        self.drain.drain(DRAIN).await;
    }

    /// Die abruptly: every connection is cut, nothing is drained (tests).
    pub async fn kill(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
        // dropping the drain stops the rest (metrics, RDMA)
    }
}

/// Open the export, bind the listeners, start serving, write the ready file.
pub async fn start(args: Args) -> anyhow::Result<Server> {
    let export = args.export.clone();
    let policy = args.export_policy();
    // A removed file stays reachable by id while a gateway's kernel may
    // still open it by its old name: until the callback reaches it, at most
    // one lease, plus an open's trip here (posix `fdcache`).
    let removal_grace = std::time::Duration::from_secs_f64(args.kernel_lease * 2.0);
    let posix_xl = Arc::new(posix::PosixTranslator::new(
        posix::Posix::with_policy(&export, args.fd_cache, policy)
            .with_context(|| format!("opening export {}", export.display()))?
            .with_removal_grace(removal_grace),
    ));
    if !removal_grace.is_zero() {
        let px = Arc::downgrade(&posix_xl);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval((removal_grace / 4).max(std::time::Duration::from_millis(10)));
            while let Some(p) = { tick.tick().await; px.upgrade() } {
                p.posix().expire_holds();
            }
        });
    }
    if policy != posix::ExportPolicy::default() {
        tracing::info!(?policy, "export policy");
    }
    let volume = Arc::new(Volume::open(&posix_xl.posix().meta_path()).context("opening the volume config")?);
    if args.cache_nodes.is_some() || args.volume.is_some() || args.block_size.is_some() {
        // Held to the same options table as every other change (Volume::update validates).
        let c = volume
            .update(|c| {
                if let Some(n) = &args.cache_nodes {
                    c.nodes = n.iter().filter(|s| !s.is_empty()).cloned().collect();
                }
                if let Some(v) = &args.volume {
                    c.volume = v.clone();
                }
                if let Some(b) = args.block_size {
                    c.block_size = b;
                }
            })
            .context("imca storage --cache-nodes / --volume / --block-size")?;
        tracing::info!(epoch = c.epoch, nodes = ?c.nodes, "volume config");
    }
    let rdma = transport::select::use_rdma(args.transport, "storage server").map_err(anyhow::Error::msg)?;
    let secret = args.credentials.load()?;
    let rpc_key = secret.as_ref().map(|s| s.key(secret::Purpose::RpcHandshake));
    // One registry for everything this server runs (see the daemon crate).
    let registry = prometheus::Registry::new();
    let metrics = metrics::Metrics::register(&registry)?;
    let rpc_stats = Arc::new(transport::tcp::ServerStats::default());
    let smcache = smcache::SmOptions {
        threaded: args.threaded_cache_updates,
        deadline: std::time::Duration::from_millis(args.cache_deadline_ms.max(1)),
        // SMCache's banks (built lazily from the volume config) reach the
        // cache nodes over RDMA too.
        bank: args.cache.apply(cache_bank::BankOptions {
            rdma,
            metrics: cache_bank::BankMetrics::register(&registry)?,
            // every value MAC-checked under the volume secret (none: --insecure)
            value_key: secret.as_ref().map(|s| s.key(secret::Purpose::BankValues)),
            // the volume's own login to the nodes (none: --insecure)
            node_credentials: secret.as_ref().map(cache_bank::Credentials::of_volume),
            ..Default::default()
        })?,
    };
    let sessions = graph::SessionOptions {
        lease: std::time::Duration::from_secs_f64(args.kernel_lease),
        record: Some(posix_xl.posix().meta_path().join("kernel-leases")),
        lock_grace: std::time::Duration::from_secs_f64(args.lock_grace),
    };
    let service = Arc::new(graph::build(posix_xl.clone(), volume.clone(), smcache, sessions, &registry).await?);

    let drain = daemon::Drain::new();
    let listener =
        tokio::net::TcpListener::bind(&args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let metrics_addr = match &args.metrics {
        Some(m) => {
            let (px, rs) = (posix_xl.clone(), rpc_stats.clone());
            let refresh = move || {
                metrics.open_fds.set(px.posix().open_fds() as i64);
                metrics.rpc.refresh(&rs);
            };
            Some(daemon::spawn_metrics(m, registry.clone(), refresh, drain.token()).await?)
        }
        None => None,
    };
    // RDMA (rdma helper): same ip:port in rdma_cm's port space.
    if rdma {
        let svc: Arc<dyn transport::RpcService> = service.clone();
        let limits = transport::select::RdmaServe {
            auth: rpc_key.clone(),
            allow: args.rpc.auth_allow.clone(),
            max_connections: Some(args.max_connections),
            memory: Some(args.rpc.rpc_memory),
        };
        transport::select::serve_rdma(addr, svc, limits, drain.token().stopped())
            .await
            .with_context(|| format!("listening for RDMA on {addr}"))?;
    }
    let opts = transport::tcp::ServerOptions { auth: rpc_key, ..args.rpc.server_options(args.max_connections, rpc_stats.clone())? };
    let token = drain.token();
    let task = tokio::spawn(async move {
        if let Err(e) = transport::tcp::serve(listener, service, opts, token.stopped()).await {
            tracing::error!("storage RPC server failed: {e}");
        }
        drop(token);
    });
    tracing::info!(%addr, export = %export.display(), epoch = volume.epoch(), "storage server listening");
    if let Some(path) = &args.ready_file {
        let ready = serde_json::json!({
            "addr": addr.to_string(),
            "metrics": metrics_addr.map(daemon::metrics_url),
            "export": export.display().to_string(),
            "epoch": volume.epoch(),
            "rdma": rdma,
        });
        daemon::write_ready_file(path, &ready)?;
    }
    Ok(Server { addr, metrics_addr, volume, registry, rpc_stats, drain, task })
}

/// Serve until `shutdown` completes, then stop gracefully.
pub async fn run(args: Args, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let server = start(args).await?;
    shutdown.await;
    tracing::info!("storage server shutting down");
    server.shutdown().await;
    Ok(())
}

/// Entry point of `imca storage`.
pub fn main(args: Args) -> anyhow::Result<()> {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(args.workers.map_or((cpus / 2).clamp(1, 8), usize::from))
        .max_blocking_threads(args.io_threads.max(1))
        .build()?;
    rt.block_on(run(args, daemon::signals()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags are refused with the rule they break, before anything listens.
    #[tokio::test]
    async fn volume_flags_follow_the_options_table() {
        let dir = tempfile::tempdir().unwrap();
        for (set, words) in [
            (&(|a: &mut Args| a.block_size = Some(1000)) as &dyn Fn(&mut Args), "not a power of two"),
            (&|a: &mut Args| a.volume = Some("my vol".into()), "volume name \"my vol\""),
            (&|a: &mut Args| a.volume = Some("v".repeat(49)), "49 characters"),
            (&|a: &mut Args| a.cache_nodes = Some(vec!["no-port".into()]), "not host:port"),
        ] {
            let mut args = Args::new(dir.path());
            set(&mut args);
            let e = format!("{:#}", start(args).await.err().expect("refused"));
            assert!(e.contains("--block-size") && e.contains(words), "{e}");
        }
        // No credentials at all: refused, saying what to give.
        let e = format!("{:#}", start(Args::new(dir.path())).await.err().expect("refused without a secret"));
        assert!(e.contains("--secret-file") && e.contains("--insecure"), "{e}");
        let mut args = Args::new(dir.path());
        args.credentials = daemon::Credentials::with(secret::Secret::generate());
        args.volume = Some("a.b".into());
        let s = start(args).await.unwrap();
        assert_eq!(s.volume.current().volume, "a.b", "used as given, never rewritten");
        s.shutdown().await;
    }
}

/// `--kernel-lease`: seconds, 0.05 to 60.
fn parse_lease(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.05..=60.0).contains(&v) {
        return Err(format!("{v} s is outside 0.05..=60 s"));
    }
    Ok(v)
}

/// `--lock-grace`: seconds, 0 to 600.
fn parse_grace(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=600.0).contains(&v) {
        return Err(format!("{v} s is outside 0..=600 s"));
    }
    Ok(v)
}
