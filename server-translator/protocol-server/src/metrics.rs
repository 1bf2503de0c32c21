//! Per-request metrics of a storage server.

use metric_series::{exponential_buckets, OpSeries};
use prometheus::Registry;
use std::time::Duration;

/// `imca_storage_ops_total{op,result}` (result: ok | error) and
/// `imca_storage_op_duration_seconds{op}`.
pub struct Metrics(OpSeries);

impl Metrics {
    pub fn register(registry: &Registry) -> Metrics {
        let series = OpSeries::new(
            ("imca_storage_ops_total", "Storage RPC operations served, by op and result"),
            ("imca_storage_op_duration_seconds", "Time to serve a storage RPC operation"),
            exponential_buckets(10e-6, 2.0, 20),
        );
        // Registration fails only for a duplicate name: one protocol-server per registry.
        let _ = series.register(registry);
        Metrics(series)
    }

    pub fn observe(&self, op: &str, ok: bool, took: Duration) {
        self.0.observe(op, if ok { "ok" } else { "error" }, took);
    }
}
