//! The protocol-client's metrics: whether each storage server is used, and
//! how many calls were failed at once because it was not.
//!
//! Made before the clients connect (a gateway builds its registry later),
//! registered by whoever owns the registry with [`HealthMetrics::register`].

/// `imca_gateway_storage_server_up{server}` and
/// `imca_gateway_storage_fast_failed_total{server}`. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HealthMetrics {
    pub up: prometheus::IntGaugeVec,
    pub fast_failed: prometheus::IntCounterVec,
}

impl HealthMetrics {
    pub fn new() -> HealthMetrics {
        HealthMetrics {
            up: prometheus::IntGaugeVec::new(
                prometheus::Opts::new(
                    "imca_gateway_storage_server_up",
                    "1 while a storage server is used, 0 while it is marked down (it missed a deadline; a probe brings it back)",
                ),
                &["server"],
            )
            .expect("valid metric"),
            fast_failed: prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "imca_gateway_storage_fast_failed_total",
                    "Storage calls failed with EIO at once because their server was marked down",
                ),
                &["server"],
            )
            .expect("valid metric"),
        }
    }

    pub fn register(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.up.clone()))?;
        registry.register(Box::new(self.fast_failed.clone()))
    }
}

impl Default for HealthMetrics {
    fn default() -> Self {
        HealthMetrics::new()
    }
}
