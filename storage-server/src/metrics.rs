//! The storage server's Prometheus metrics, and the `/metrics` endpoint.

use prometheus::{IntGauge, Registry, TextEncoder};
use std::net::SocketAddr;
use std::sync::Arc;

pub struct Metrics {
    /// this server's registry; protocol-server registers its per-op metrics here
    pub registry: Registry,
    /// `imca_storage_open_fds`: data fds held by the posix fd cache
    pub open_fds: IntGauge,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let registry = Registry::new();
        let open_fds = IntGauge::new("imca_storage_open_fds", "Data file descriptors held by the fd cache").unwrap();
        registry.register(Box::new(open_fds.clone())).unwrap();
        Arc::new(Metrics { registry, open_fds })
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
