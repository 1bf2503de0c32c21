//! The gateway's Prometheus metrics (registered once, in the default registry,
//! so that translators of other crates running in this process — CMCache, the
//! bank client — are served from the same `/metrics`).

use prometheus::{exponential_buckets, HistogramOpts, HistogramVec, IntCounterVec, Opts};
use std::sync::LazyLock;

pub struct Metrics {
    /// `imca_gateway_ops_total{op,result}`
    pub ops: IntCounterVec,
    /// `imca_gateway_op_duration_seconds{op}`
    pub duration: HistogramVec,
}

pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let ops = IntCounterVec::new(
        Opts::new("imca_gateway_ops_total", "File operations through the gateway, by operation and result"),
        &["op", "result"],
    )
    .expect("valid metric");
    let duration = HistogramVec::new(
        HistogramOpts::new("imca_gateway_op_duration_seconds", "Latency of file operations through the gateway")
            // 10 µs .. ~20 s
            .buckets(exponential_buckets(10e-6, 2.0, 22).expect("valid buckets")),
        &["op"],
    )
    .expect("valid metric");
    let reg = prometheus::default_registry();
    // Registration fails only for a duplicate name, which a LazyLock rules out.
    let _ = reg.register(Box::new(ops.clone()));
    let _ = reg.register(Box::new(duration.clone()));
    Metrics { ops, duration }
});

/// Everything in the default registry, in Prometheus text format.
pub fn render() -> String {
    use prometheus::Encoder;
    let mut out = Vec::new();
    let _ = prometheus::TextEncoder::new().encode(&prometheus::gather(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Serve `/metrics` on `listener` until `shutdown` resolves.
pub async fn serve(listener: tokio::net::TcpListener, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
    LazyLock::force(&METRICS);
    let app = axum::Router::new().route("/metrics", axum::routing::get(|| async { render() }));
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        tracing::warn!(error = %e, "metrics server stopped");
    }
}
