//! The bank client's Prometheus metrics.
//!
//! A daemon registers one [`BankMetrics`] in its own registry and puts it in
//! the [`BankOptions`](crate::BankOptions) it hands down: every bank it
//! builds (CMCache's, SMCache's, rebuilt on each pool change) counts into
//! the same series. `BankMetrics::default()` counts without exporting
//! (tools, tests).

use metric_series as series;
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec, Registry};

#[derive(Clone, Debug)]
pub struct BankMetrics {
    /// `imca_bank_requests_total{node,op,result}`: per key (gets) or per
    /// command (updates); `op` get|claim|set|add|cas|delete, `result`
    /// hit|miss|ok|queued|error|timeout|node_gone.
    pub requests: IntCounterVec,
    /// `imca_bank_bytes_total{node}`: value bytes received (hits).
    pub bytes: IntCounterVec,
    /// `imca_bank_request_seconds{op}`: one pipelined batch's round trip to one node.
    pub latency: HistogramVec,
    /// `imca_bank_connections_total{node,transport}`: connections opened
    /// (rdma|tcp: over RDMA a node that does not speak it is reached over
    /// TCP, which shows here).
    pub connects: IntCounterVec,
    /// `imca_bank_value_rejected_total{reason}`: values read from the bank
    /// and refused (each a miss); reasons in [`crate::rejects::Reason`].
    pub rejected: IntCounterVec,
    /// `imca_bank_node_open{node}`: 1 when the node served a request made
    /// without a login at our last connect (anyone may write it), 0 when it
    /// required the login.
    pub open: IntGaugeVec,
}

impl Default for BankMetrics {
    fn default() -> Self {
        BankMetrics {
            requests: series::counter_vec(
                "imca_bank_requests_total",
                "Cache-bank keys requested or commands sent, by node, op and result",
                &["node", "op", "result"],
            ),
            bytes: series::counter_vec("imca_bank_bytes_total", "Value bytes served by the bank, by node", &["node"]),
            latency: series::histogram_vec(
                "imca_bank_request_seconds",
                "Round trip of one pipelined batch to one node",
                &["op"],
                vec![0.00002, 0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0],
            ),
            connects: series::counter_vec(
                "imca_bank_connections_total",
                "Connections opened to cache nodes, by node and transport",
                &["node", "transport"],
            ),
            rejected: series::counter_vec(
                "imca_bank_value_rejected_total",
                "Values read from the bank and refused as forged, corrupted or foreign (each a miss), by reason",
                &["reason"],
            ),
            open: series::gauge_vec(
                "imca_bank_node_open",
                "1 when a cache node served a request made without a login (anyone may write it)",
                &["node"],
            ),
        }
    }
}

impl BankMetrics {
    /// The bank metrics, registered in `registry` (once per registry: a
    /// second registration of the same names is an error).
    pub fn register(registry: &Registry) -> prometheus::Result<BankMetrics> {
        let m = BankMetrics::default();
        series::register(registry, &[&m.requests, &m.bytes, &m.latency, &m.connects, &m.rejected, &m.open])?;
        Ok(m)
    }

    pub fn count(&self, node: &str, op: &str, result: &str, n: u64) {
        if n > 0 {
            self.requests.with_label_values(&[node, op, result]).inc_by(n);
        }
    }
}
