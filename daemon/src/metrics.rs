//! `GET /metrics`: one registry, in Prometheus' text format.

use crate::Shutdown;
use anyhow::Context;
use prometheus::Registry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Everything in `registry`, in Prometheus' text format.
pub fn render(registry: &Registry) -> String {
    prometheus::TextEncoder::new().encode_to_string(&registry.gather()).unwrap_or_default()
}

/// `http://ADDR/metrics`, as ready files and `imca up` name an endpoint.
pub fn metrics_url(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics")
}

/// Serve `GET /metrics` on `listener` until `shutdown` resolves, then
/// finish the scrapes in flight. `refresh` runs before each scrape: it
/// brings gauges and counters kept elsewhere up to date (open fds, a cache
/// node's own counters), so the request path never touches a metric.
pub async fn serve_metrics(
    listener: TcpListener,
    registry: Registry,
    refresh: impl Fn() + Send + Sync + 'static,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let refresh = Arc::new(refresh);
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let (registry, refresh) = (registry.clone(), refresh.clone());
            async move {
                refresh();
                ([(axum::http::header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], render(&registry))
            }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// Bind `addr` (`--metrics ADDR`) and [`serve_metrics`] in a task that holds
/// `token` until the server has stopped. Returns the bound address.
pub async fn spawn_metrics(
    addr: &str,
    registry: Registry,
    refresh: impl Fn() + Send + Sync + 'static,
    token: Shutdown,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.with_context(|| format!("binding metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = serve_metrics(listener, registry, refresh, token.stopped()).await {
            tracing::error!(error = %e, "metrics endpoint failed");
        }
        drop(token);
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Drain;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_its_registry_refreshed_and_stops_on_drain() {
        let registry = Registry::new();
        let g = prometheus::IntGauge::new("imca_test_refreshes", "scrapes seen").unwrap();
        registry.register(Box::new(g.clone())).unwrap();
        let n = Arc::new(AtomicU64::new(0));
        let n2 = n.clone();
        let refresh = move || g.set(n2.fetch_add(1, Ordering::Relaxed) as i64 + 1);
        let drain = Drain::new();
        let addr = spawn_metrics("127.0.0.1:0", registry, refresh, drain.token()).await.unwrap();
        let body = get(addr, "/metrics").await;
        assert!(body.contains("imca_test_refreshes 1"), "{body}");
        assert!(body.contains("text/plain; version=0.0.4"), "{body}");
        assert!(get(addr, "/metrics").await.contains("imca_test_refreshes 2"));
        assert!(get(addr, "/other").await.starts_with("HTTP/1.1 404"));
        assert!(drain.drain(Duration::from_secs(10)).await, "the metrics task finished");
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "listener closed");
    }

    #[test]
    fn two_registries_in_one_process_do_not_collide() {
        let (a, b) = (Registry::new(), Registry::new());
        for r in [&a, &b] {
            let c = prometheus::IntCounter::new("imca_test_total", "same name twice").unwrap();
            r.register(Box::new(c)).unwrap();
        }
        assert!(render(&a).contains("imca_test_total 0"));
        assert_eq!(metrics_url("127.0.0.1:9".parse().unwrap()), "http://127.0.0.1:9/metrics");
    }
}
