//! # cache-node — `imca cache-node`, a memcached-compatible cache daemon
//!
//! One member of the cache bank. Gateways (CMCache) read stat,
//! directory-entry and block keys from it; storage servers
//! (SMCache) write them. Ordinary memcached clients and tools work
//! against it unchanged.
//!
//! ```text
//!  TCP or UNIX (-s) accept (listen.rs, server.rs) ──> a worker (place.rs) ──> one task per connection
//!        bytes ──> Session (session.rs) ──parse──> cache-proto frames
//!                      │   text / meta / binary chosen by the first byte
//!                      └──> exec_{text,meta,binary}.rs ──> Node (node.rs):
//!                              memcached semantics over Store (store.rs):
//!                              sharded byte-bounded LRU (table.rs; short keys inline, key.rs),
//!                              bounded by -m plus the slab pages memcached keeps (store/pages.rs);
//!                              a multi-get, or a run of pipelined mg / binary gets, warms its
//!                              keys' lookups first (store/prefetch.rs)
//!        replies ──> Out (out.rs): headers + values pinned by refcount ──> writev
//!  --metrics ADDR ──> daemon::serve_metrics /metrics (metrics.rs), reading the same counters
//!  --transport rdma / --rdma ADDR ──> rdma.rs: the same Session per RDMA message
//!  -Y authfile ──> auth.rs: memcached's ASCII login, first on every connection
//!  watch ──> watch.rs: log lines (fetchers, mutations, evictions, connevents) to watchers
//!  stats conns ──> conns.rs: the open connections
//!  lru-maintainer thread (store/maintainer.rs): moves items read lately out of the evictions' way
//!    (not started with `-o no_lru_maintainer`, as memcached's)
//! ```
//!
//! ## Threads and tasks
//! Like memcached: one acceptor task, `-t` worker threads each with its own
//! single-threaded tokio runtime, one task per connection (bounded by `-c`;
//! beyond it memcached's "ERROR Too many open connections"). Unlike
//! memcached's round-robin, a TCP connection is dealt to a worker of the CPU
//! its packets arrive on, so one client thread's connections share a worker
//! (`place.rs`).
//! The store is split into `16 × threads` shards, each an item table with
//! its LRU list (`table.rs`) behind its own mutex, held only for the duration of one key's operation.
//! One more thread, as in memcached, is the LRU maintainer (`store/maintainer.rs`):
//! it keeps the tails ready for evictions, so that a store's own eviction
//! work stays a few items.
//!
//! Start-up, shutdown, the ready file and `/metrics` follow the `daemon`
//! crate's skeleton: every task holds a `daemon::Shutdown` token and
//! [`Handle::shutdown`] drains them.
//!
//! ## In-process API (for other crates' tests and other listeners)
//! - [`start`]`(config)` binds, spawns the node on the current tokio runtime
//!   and returns a [`Handle`] with the bound `addr`, `metrics_addr`, the
//!   [`Node`] (stats, store, clock) and [`Handle::shutdown`].
//! - [`run`]`(config, shutdown)` is the same but runs until `shutdown` resolves.
//! - [`Session`] is the socket-free core: feed it the bytes a peer sent, get
//!   back the bytes to send and whether to close. Any transport (e.g. an RDMA
//!   listener) can serve memcached with it:
//!   ```ignore
//!   let mut s = cache_node::Session::new(handle.node.clone());
//!   let mut input = bytes::BytesMut::from(&b"set k 0 0 1\r\nv\r\nget k\r\n"[..]);
//!   let mut out = Vec::new();
//!   let p = s.process(&mut input, &mut out); // out = "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"
//!   // a partial request stays in `input`; append more bytes and call again
//!   ```

mod admission;
mod cache_line;
mod clock;
pub mod auth;
pub mod compat;
pub mod config;
pub mod conns;
mod exec_binary;
mod exec_get;
mod exec_meta;
mod exec_sasl;
mod exec_text;
mod exec_watch;
pub mod exit;
mod key;
pub mod item;
pub mod listen;
pub mod metrics;
pub mod node;
pub mod out;
mod place;
pub mod rdma;
pub mod server;
pub mod session;
mod single_get;
pub mod slabs;
pub mod stats;
mod stats_reply;
pub mod store;
mod table;
pub mod watch;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

pub use clock::Clock;
pub use config::{Args, Config};
pub use node::Node;
pub use out::Out;
pub use session::{Progress, Session, OUT_HIGH_WATER};

/// How long [`Handle::shutdown`] waits: the workers give their connections
/// `server::DRAIN` to finish a batch, then cut them.
const DRAIN: Duration = Duration::from_secs(10);

/// A running node started with [`start`].
pub struct Handle {
    /// the bound memcached address (useful when the config said port 0);
    /// `0.0.0.0:0` when listening on a UNIX socket (`unix_socket`) instead
    pub addr: SocketAddr,
    /// the UNIX socket listened on (`-s`), instead of TCP
    pub unix_socket: Option<std::path::PathBuf>,
    /// the bound metrics address, when `--metrics` was given
    pub metrics_addr: Option<SocketAddr>,
    /// the bound RDMA address, when `--rdma` or `--transport rdma` was given
    pub rdma_addr: Option<SocketAddr>,
    pub node: Arc<Node>,
    /// what `/metrics` serves (this node's metrics only)
    pub registry: prometheus::Registry,
    drain: daemon::Drain,
}

impl Handle {
    /// Stops accepting, lets connections finish their current batch, and waits.
    pub async fn shutdown(self) {
        self.drain.drain(DRAIN).await;
    }
}

/// Binds the listeners, writes the ready file, and spawns the node.
pub async fn start(config: Config) -> anyhow::Result<Handle> {
    let registry = prometheus::Registry::new();
    let mut node = Node::new(config.clone());
    if config.metrics.is_some() {
        node.metrics = Some(metrics::Metrics::register(&registry)?);
    }
    let listener = listen::Listener::bind(&config).await?;
    let addr = match &listener {
        listen::Listener::Tcp(l) => l.local_addr()?,
        listen::Listener::Unix(..) => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    // `stats settings` tcpport: memcached shows -p even when -s disables TCP
    let port = match &listener {
        listen::Listener::Tcp(_) => addr.port(),
        listen::Listener::Unix(..) => config.listen.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap_or(0),
    };
    node.port.store(u32::from(port), Ordering::Relaxed);
    // what the ready file and the log name as this node's address
    let shown = match &config.unix_socket {
        Some(p) => format!("unix:{}", p.display()),
        None => addr.to_string(),
    };
    let node = Arc::new(node);
    if config.lru_maintainer {
        node.start_maintainer().context("starting the LRU maintainer thread")?;
    }
    let drain = daemon::Drain::new();
    let metrics_addr = match &config.metrics {
        Some(m) => {
            let n = node.clone();
            let refresh = move || n.metrics.as_ref().into_iter().for_each(|mm| mm.refresh(&n.stats, &n.store, &n.crowd));
            Some(daemon::spawn_metrics(m, registry.clone(), refresh, drain.token()).await?)
        }
        None => None,
    };
    // RDMA: on `--rdma ADDR`, or with `--transport rdma` on the bound TCP
    // address (rdma_cm's port space is separate from TCP's, so the same
    // ip:port reaches this node either way; see transport::select).
    let rdma_at = match (&config.rdma, config.rdma_on_listen) {
        (Some(r), _) => Some(r.parse::<SocketAddr>().with_context(|| format!("--rdma {r}: not ip:port"))?),
        (None, true) => Some(addr),
        (None, false) => None,
    };
    let mut rdma_addr = None;
    if let Some(ra) = rdma_at {
        let svc = Arc::new(rdma::MemcacheService::new(node.clone()));
        let token = drain.token();
        let (bound, task) = transport::select::serve_rdma(ra, svc, Default::default() /* a cache node holds no volume secret */, token.stopped())
            .await
            .with_context(|| format!("listening for RDMA on {ra}"))?;
        // The drain waits for the RDMA server, which closes every connection
        // once stopped: a node that has shut down answers nobody.
        tokio::spawn(async move {
            let _ = task.await;
            drop(token);
        });
        tracing::info!(%bound, "cache node listening for RDMA");
        rdma_addr = Some(bound);
    }
    if let Some(path) = &config.ready_file {
        let ready = serde_json::json!({
            "addr": shown,
            "metrics": metrics_addr.map(daemon::metrics_url),
            "rdma": rdma_addr.map(|r| r.to_string()),
            "pid": std::process::id(),
        });
        daemon::write_ready_file(path, &ready)?;
    }
    tracing::info!(addr = %shown, ?metrics_addr, "cache node listening");
    tokio::spawn(server::serve(listener, node.clone(), drain.token()));
    Ok(Handle { addr, unix_socket: config.unix_socket.clone(), metrics_addr, rdma_addr, node, registry, drain })
}

/// Runs a node until `shutdown` resolves, then stops it gracefully.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let h = start(config).await?;
    tokio::select! {
        _ = shutdown => {}
        _ = h.node.shutdown.notified() => {}
    }
    tracing::info!("cache node shutting down");
    h.shutdown().await;
    Ok(())
}

/// Entry point used by the `imca` binary; builds its own runtime.
pub fn main(args: Args) -> anyhow::Result<()> {
    if let compat::Verdict::Exit = compat::apply(&args.extra)? {
        return Ok(());
    }
    let config = Config::try_from(&args)?;
    if args.user.is_some() && unsafe { libc::geteuid() } == 0 {
        tracing::warn!("-u is accepted for compatibility; this process does not switch users");
    }
    // The acceptor and /metrics run here; connections run on the worker threads.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(config, daemon::signals()))
}
