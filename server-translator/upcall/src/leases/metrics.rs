//! The lease table's metrics (names unchanged since it lived in protocol-server).

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};

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
        let waits = IntCounterVec::new(
            Opts::new(
                "imca_storage_callbacks_total",
                "Invalidation callbacks to gateways, by how the wait ended (not_held: queued for a gateway that holds none of what they name, not waited for)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let wait = Histogram::with_opts(
            HistogramOpts::new("imca_storage_callback_wait_seconds", "Time a mutation waited for other gateways' callbacks")
                .buckets(prometheus::exponential_buckets(10e-6, 2.0, 20).expect("valid buckets")),
        )
        .expect("valid metric");
        let sessions = IntGauge::new("imca_storage_kernel_cache_sessions", "Gateway sessions known to this server").expect("valid metric");
        let holds = IntGauge::new("imca_storage_kernel_cache_holds", "Inodes gateways told this server their kernels may cache (the leases held)")
            .expect("valid metric");
        let _ = registry.register(Box::new(waits.clone()));
        let _ = registry.register(Box::new(wait.clone()));
        let _ = registry.register(Box::new(sessions.clone()));
        let _ = registry.register(Box::new(holds.clone()));
        Metrics { waits, wait, sessions, holds }
    }
}
