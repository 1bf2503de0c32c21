//! # cache-node — `imca cache-node`, a memcached-compatible cache daemon
//!
//! One member of the cache bank. Gateways (CMCache) read stat,
//! directory-entry and block keys from it; storage servers
//! (SMCache) write them. Ordinary memcached clients and tools work
//! against it unchanged.
//!
//! ```text
//!  TCP accept (server.rs) ──> one task per connection
//!        bytes ──> Session (session.rs) ──parse──> cache-proto frames
//!                      │   text / meta / binary chosen by the first byte
//!                      └──> exec_{text,meta,binary}.rs ──> Node (node.rs):
//!                              memcached semantics over Store (store.rs):
//!                              sharded byte-bounded LRU (lru crate)
//!  --metrics ADDR ──> axum /metrics (metrics.rs), reading the same counters
//!  --transport rdma / --rdma ADDR ──> rdma.rs: the same Session per RDMA message
//! ```
//!
//! ## Threads and tasks
//! Like memcached: one acceptor task, `-t` worker threads each with its own
//! single-threaded tokio runtime, connections dealt to workers round-robin,
//! one task per connection (bounded by `-c`; beyond it memcached's
//! "ERROR Too many open connections").
//! The store is split into `16 × threads` shards, each an `lru::LruCache`
//! behind its own mutex, held only for the duration of one key's operation.
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

mod clock;
pub mod config;
mod exec_binary;
mod exec_meta;
mod exec_text;
pub mod metrics;
pub mod node;
pub mod rdma;
pub mod server;
pub mod session;
pub mod stats;
mod stats_reply;
pub mod store;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use clock::Clock;
pub use config::{Args, Config};
pub use node::Node;
pub use session::{Progress, Session, OUT_HIGH_WATER};

/// A running node started with [`start`].
pub struct Handle {
    /// the bound memcached address (useful when the config said port 0)
    pub addr: SocketAddr,
    /// the bound metrics address, when `--metrics` was given
    pub metrics_addr: Option<SocketAddr>,
    /// the bound RDMA address, when `--rdma` or `--transport rdma` was given
    pub rdma_addr: Option<SocketAddr>,
    pub node: Arc<Node>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Handle {
    /// Stops accepting, lets connections finish their current batch, and waits.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Binds the listeners, writes the ready file, and spawns the node.
pub async fn start(config: Config) -> anyhow::Result<Handle> {
    let mut node = Node::new(config.clone());
    if config.metrics.is_some() {
        node.metrics = Some(metrics::Metrics::new()?);
    }
    let listener = TcpListener::bind(&config.listen).await.with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    node.port.store(u32::from(addr.port()), Ordering::Relaxed);
    let node = Arc::new(node);
    let (stop, rx) = watch::channel(false);
    let mut metrics_addr = None;
    let mut metrics_task = None;
    if let Some(m) = &config.metrics {
        let l = TcpListener::bind(m).await.with_context(|| format!("binding metrics {m}"))?;
        metrics_addr = Some(l.local_addr()?);
        let app = metrics::router(node.clone());
        let mut rx2 = rx.clone();
        metrics_task = Some(tokio::spawn(async move {
            let _ = axum::serve(l, app)
                .with_graceful_shutdown(async move {
                    let _ = rx2.changed().await;
                })
                .await;
        }));
    }
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
        let (svc, mut rx3) = (Arc::new(rdma::MemcacheService::new(node.clone())), rx.clone());
        let stop = async move {
            let _ = rx3.changed().await;
        };
        let (bound, _task) =
            transport::select::serve_rdma(ra, svc, stop).await.with_context(|| format!("listening for RDMA on {ra}"))?;
        tracing::info!(%bound, "cache node listening for RDMA");
        rdma_addr = Some(bound);
    }
    if let Some(path) = &config.ready_file {
        write_ready(path, addr, metrics_addr, rdma_addr)?;
    }
    tracing::info!(%addr, ?metrics_addr, "cache node listening");
    let n2 = node.clone();
    let task = tokio::spawn(async move {
        server::serve(listener, n2, rx).await;
        if let Some(t) = metrics_task {
            let _ = t.await;
        }
    });
    Ok(Handle { addr, metrics_addr, rdma_addr, node, stop, task })
}

/// Runs a node until `shutdown` resolves, then stops it gracefully.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let h = start(config).await?;
    shutdown.await;
    tracing::info!("cache node shutting down");
    h.shutdown().await;
    Ok(())
}

fn write_ready(
    path: &std::path::Path,
    addr: SocketAddr,
    metrics: Option<SocketAddr>,
    rdma: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let metrics = metrics.map_or("null".to_string(), |m| format!("\"http://{m}/metrics\""));
    let rdma = rdma.map_or("null".to_string(), |r| format!("\"{r}\""));
    let json = format!(
        "{{\"addr\": \"{addr}\", \"metrics\": {metrics}, \"rdma\": {rdma}, \"pid\": {}}}\n",
        std::process::id()
    );
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, json).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn signals() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Entry point used by the `imca` binary; builds its own runtime.
pub fn main(args: Args) -> anyhow::Result<()> {
    let config = Config::try_from(&args)?;
    if args.user.is_some() && unsafe { libc::geteuid() } == 0 {
        tracing::warn!("-u is accepted for compatibility; this process does not switch users");
    }
    // The acceptor and /metrics run here; connections run on the worker threads.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(config, signals()))
}
