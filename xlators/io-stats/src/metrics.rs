//! io-stats' metrics, in the process-wide default registry so the gateway's
//! `/metrics` serves them with every other translator's.

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
