//! io-stats' metrics, registered in the gateway's registry (one io-stats
//! per gateway, so one set of series per registry).

use prometheus::{exponential_buckets, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

pub struct Metrics {
    /// `imca_gateway_ops_total{op,result}`
    pub ops: IntCounterVec,
    /// `imca_gateway_op_duration_seconds{op}`
    pub duration: HistogramVec,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Metrics {
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
        // Registration fails only for a duplicate name: one io-stats per registry.
        let _ = registry.register(Box::new(ops.clone()));
        let _ = registry.register(Box::new(duration.clone()));
        Metrics { ops, duration }
    }
}
