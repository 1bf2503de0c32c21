//! The storage server's Prometheus metrics, and the `/metrics` endpoint.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub struct Metrics {
    pub registry: Registry,
    /// `imca_storage_ops_total{op,result}` (result: ok | error)
    pub ops: IntCounterVec,
    /// `imca_storage_op_duration_seconds{op}`
    pub duration: HistogramVec,
    /// `imca_storage_open_fds`: data fds held by the posix fd cache
    pub open_fds: IntGauge,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        let ops = IntCounterVec::new(
            Opts::new("imca_storage_ops_total", "Storage RPC operations served, by op and result"),
            &["op", "result"],
        )
        .unwrap();
        let duration = HistogramVec::new(
            HistogramOpts::new("imca_storage_op_duration_seconds", "Time to serve a storage RPC operation")
                .buckets(prometheus::exponential_buckets(10e-6, 2.0, 20).unwrap()),
            &["op"],
        )
        .unwrap();
        let open_fds = IntGauge::new("imca_storage_open_fds", "Data file descriptors held by the fd cache").unwrap();
        registry.register(Box::new(ops.clone())).unwrap();
        registry.register(Box::new(duration.clone())).unwrap();
        registry.register(Box::new(open_fds.clone())).unwrap();
        Arc::new(Metrics { registry, ops, duration, open_fds })
    }

    pub fn observe(&self, op: &str, ok: bool, took: Duration) {
        self.ops.with_label_values(&[op, if ok { "ok" } else { "error" }]).inc();
        self.duration.with_label_values(&[op]).observe(took.as_secs_f64());
    }

    /// This server's metrics plus the process-wide default registry, where
    /// SMCache (`imca_storage_cache_ops_total`) and its bank client
    /// (`imca_bank_*`) register theirs.
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        families.extend(prometheus::gather());
        TextEncoder::new().encode_to_string(&families).unwrap_or_default()
    }
}

/// Serve `/metrics` on an already bound listener until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    refresh: impl Fn() + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let refresh = Arc::new(refresh);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let (m, r) = (metrics.clone(), refresh.clone());
            async move {
                r();
                m.render()
            }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics")
}
