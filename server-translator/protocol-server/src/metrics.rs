//! Per-request metrics of a storage server.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use std::time::Duration;

pub struct Metrics {
    /// `imca_storage_ops_total{op,result}` (result: ok | error)
    ops: IntCounterVec,
    /// `imca_storage_op_duration_seconds{op}`
    duration: HistogramVec,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Metrics {
        let ops = IntCounterVec::new(
            Opts::new("imca_storage_ops_total", "Storage RPC operations served, by op and result"),
            &["op", "result"],
        )
        .expect("valid metric");
        let duration = HistogramVec::new(
            HistogramOpts::new("imca_storage_op_duration_seconds", "Time to serve a storage RPC operation")
                .buckets(prometheus::exponential_buckets(10e-6, 2.0, 20).expect("valid buckets")),
            &["op"],
        )
        .expect("valid metric");
        // Registration fails only for a duplicate name: one protocol-server per registry.
        let _ = registry.register(Box::new(ops.clone()));
        let _ = registry.register(Box::new(duration.clone()));
        Metrics { ops, duration }
    }

    pub fn observe(&self, op: &str, ok: bool, took: Duration) {
        self.ops.with_label_values(&[op, if ok { "ok" } else { "error" }]).inc();
        self.duration.with_label_values(&[op]).observe(took.as_secs_f64());
    }
}
