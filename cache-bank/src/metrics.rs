//! The bank client's Prometheus metrics (process-wide default registry, so
//! every daemon's `/metrics` shows them).

use prometheus::{register_histogram_vec, register_int_counter_vec, HistogramVec, IntCounterVec};
use std::sync::LazyLock;

/// Per key (gets) or per command (updates): `op` get|set|add|cas|delete,
/// `result` hit|miss|ok|not_stored|error|timeout|down.
pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "imca_bank_requests_total",
        "Cache-bank keys requested or commands sent, by node, op and result",
        &["node", "op", "result"]
    )
    .expect("metric registers once")
});

/// Value bytes received from the bank (hits), per node.
pub static BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("imca_bank_bytes_total", "Value bytes served by the bank, by node", &["node"])
        .expect("metric registers once")
});

/// One batch's round trip to one node.
pub static LATENCY: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "imca_bank_request_seconds",
        "Round trip of one pipelined batch to one node",
        &["op"],
        vec![0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0]
    )
    .expect("metric registers once")
});

/// Connections opened, per node and transport (rdma|tcp: over RDMA a node
/// that does not speak it is reached over TCP, which shows here).
pub static CONNECTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "imca_bank_connections_total",
        "Connections opened to cache nodes, by node and transport",
        &["node", "transport"]
    )
    .expect("metric registers once")
});

pub fn count(node: &str, op: &str, result: &str, n: u64) {
    if n > 0 {
        REQUESTS.with_label_values(&[node, op, result]).inc_by(n);
    }
}
