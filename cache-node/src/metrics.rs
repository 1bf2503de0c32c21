//! Prometheus metrics (`--metrics ADDR`, path `/metrics`, served by the
//! `daemon` crate from the node's registry).
//!
//! Counters are not bumped on the request path: at scrape time (the
//! endpoint's refresh hook, [`Metrics::refresh`]) they are brought up to the
//! node's own `stats` counters (which sessions already batch), so metrics
//! cost nothing per request except the latency histogram, which sessions
//! also buffer locally.

use metric_series as series;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, Registry};

use crate::stats::{Stats, C};
use crate::store::Store;

pub struct Metrics {
    pub latency: Histogram,
    ops: IntCounterVec,
    evictions: IntCounter,
    items: IntGauge,
    bytes: IntGauge,
    limit: IntGauge,
    connections: IntGauge,
    connections_total: IntCounter,
    rejected: IntCounterVec,
}

/// (op, result, counter)
const OPS: &[(&str, &str, C)] = &[
    ("get", "hit", C::GetHits),
    ("get", "miss", C::GetMisses),
    ("store", "stored", C::Stored),
    ("store", "not_stored", C::NotStored),
    ("store", "exists", C::Exists),
    ("store", "not_found", C::NotFound),
    ("store", "too_large", C::StoreTooLarge),
    ("delete", "hit", C::DeleteHits),
    ("delete", "miss", C::DeleteMisses),
    ("incr", "hit", C::IncrHits),
    ("incr", "miss", C::IncrMisses),
    ("decr", "hit", C::DecrHits),
    ("decr", "miss", C::DecrMisses),
    ("touch", "hit", C::TouchHits),
    ("touch", "miss", C::TouchMisses),
    ("cas", "hit", C::CasHits),
    ("cas", "miss", C::CasMisses),
    ("cas", "badval", C::CasBadval),
    ("flush", "ok", C::CmdFlush),
    ("request", "client_error", C::ClientErrors),
];

impl Metrics {
    /// The node's metrics, registered in `registry` (the node's own).
    pub fn register(registry: &Registry) -> prometheus::Result<Metrics> {
        let latency = series::histogram(
            "imca_cache_node_request_duration_seconds",
            "time to parse and execute one request (excluding network)",
            series::exponential_buckets(1e-6, 4.0, 10),
        );
        let ops = series::counter_vec("imca_cache_node_ops_total", "requests by op and result", &["op", "result"]);
        let evictions = series::counter("imca_cache_node_evictions_total", "items evicted to stay under -m");
        let items = series::gauge("imca_cache_node_items", "items currently stored");
        let bytes = series::gauge("imca_cache_node_bytes", "bytes charged against -m (keys, values, overhead)");
        let limit = series::gauge("imca_cache_node_limit_bytes", "the -m limit in bytes");
        let connections = series::gauge("imca_cache_node_connections", "open client connections");
        let connections_total = series::counter("imca_cache_node_connections_total", "accepted client connections");
        let rejected = series::counter_vec(
            "imca_cache_node_connections_rejected_total",
            "connections refused (reason conn_limit: -c; peer_limit: one uid's or IP's cap) or closed before \
             logging in with -Y (login_shed: to make room; login_timeout: past --login-timeout)",
            &["reason"],
        );
        series::register(
            registry,
            &[&latency, &ops, &evictions, &items, &bytes, &limit, &connections, &connections_total, &rejected],
        )?;
        Ok(Metrics { latency, ops, evictions, items, bytes, limit, connections, connections_total, rejected })
    }

    /// Brings every metric up to date with the node's counters, store and
    /// connection limits (before each scrape).
    pub fn refresh(&self, stats: &Stats, store: &Store, crowd: &daemon::Crowd) {
        use std::sync::atomic::Ordering::Relaxed;
        let up = |c: &IntCounter, v: u64| c.inc_by(v.saturating_sub(c.get()));
        for &(op, result, c) in OPS {
            up(&self.ops.with_label_values(&[op, result]), stats.get(c));
        }
        up(&self.evictions, store.hot.evictions.load(Relaxed));
        up(&self.connections_total, stats.total_connections.load(Relaxed));
        let crowd = &crowd.counts;
        for (reason, n) in [
            ("conn_limit", &crowd.refused_full),
            ("peer_limit", &crowd.refused_peer),
            ("login_shed", &crowd.shed),
            ("login_timeout", &crowd.reaped),
        ] {
            up(&self.rejected.with_label_values(&[reason]), n.load(Relaxed));
        }
        self.items.set(store.items() as i64);
        self.bytes.set(store.bytes() as i64);
        self.limit.set(store.limit() as i64);
        self.connections.set(stats.curr_connections.load(Relaxed) as i64);
    }
}
