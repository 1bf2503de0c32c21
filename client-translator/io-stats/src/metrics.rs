//! io-stats' metrics, registered in the gateway's registry (one io-stats
//! per gateway, so one set of series per registry).

use metric_series::{exponential_buckets, OpSeries};
use prometheus::Registry;

/// `imca_gateway_ops_total{op,result}` and `imca_gateway_op_duration_seconds{op}`.
pub type Metrics = OpSeries;

pub fn register(registry: &Registry) -> Metrics {
    let m = OpSeries::new(
        ("imca_gateway_ops_total", "File operations through the gateway, by operation and result"),
        ("imca_gateway_op_duration_seconds", "Latency of file operations through the gateway"),
        // 10 µs .. ~20 s
        exponential_buckets(10e-6, 2.0, 22),
    );
    // Registration fails only for a duplicate name: one io-stats per registry.
    let _ = m.register(registry);
    m
}
