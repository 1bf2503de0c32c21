//! The gateway's `/metrics`: everything in the process-wide default
//! registry, where the client graph's translators (io-stats, CMCache) and the
//! bank client register theirs.

/// Everything in the default registry, in Prometheus text format.
pub fn render() -> String {
    use prometheus::Encoder;
    let mut out = Vec::new();
    let _ = prometheus::TextEncoder::new().encode(&prometheus::gather(), &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Serve `/metrics` on `listener` until `shutdown` resolves.
pub async fn serve(listener: tokio::net::TcpListener, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
    let app = axum::Router::new().route("/metrics", axum::routing::get(|| async { render() }));
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        tracing::warn!(error = %e, "metrics server stopped");
    }
}
