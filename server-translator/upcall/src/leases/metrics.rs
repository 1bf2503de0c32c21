//! The lease table's metrics (names unchanged since it lived in protocol-server).

use metric_series as series;
use prometheus::{Histogram, IntCounterVec, IntGauge, Registry};

pub(super) struct Metrics {
    /// `imca_storage_callbacks_total{outcome}`: acked | expired (the
    /// gateway's lease ran out first)
    pub(super) waits: IntCounterVec,
    /// `imca_storage_callback_wait_seconds`: how long a mutation waited
    pub(super) wait: Histogram,
    /// `imca_storage_kernel_cache_sessions`: gateways with a live lease
    pub(super) sessions: IntGauge,
    /// `imca_storage_kernel_cache_holds`: inodes gateways said they hold
    pub(super) holds: IntGauge,
}

impl Metrics {
    pub(super) fn register(registry: &Registry) -> Metrics {
        let waits = series::counter_vec(
            "imca_storage_callbacks_total",
            "Invalidation callbacks to gateways, by how the wait ended (not_held: queued for a gateway that holds none of what they name, not waited for)",
            &["outcome"],
        );
        let wait = series::histogram(
            "imca_storage_callback_wait_seconds",
            "Time a mutation waited for other gateways' callbacks",
            series::exponential_buckets(10e-6, 2.0, 20),
        );
        let sessions = series::gauge("imca_storage_kernel_cache_sessions", "Gateway sessions known to this server");
        let holds =
            series::gauge("imca_storage_kernel_cache_holds", "Inodes gateways told this server their kernels may cache (the leases held)");
        // Registration fails only for a duplicate name: one lease table per registry.
        let _ = series::register(registry, &[&waits, &wait, &sessions, &holds]);
        Metrics { waits, wait, sessions, holds }
    }
}
