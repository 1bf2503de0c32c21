//! The protocol-client's metrics: whether each storage server is used, and
//! how many calls were failed at once because it was not.
//!
//! Made before the clients connect (a gateway builds its registry later),
//! registered by whoever owns the registry with [`HealthMetrics::register`].

use metric_series as series;

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
            up: series::gauge_vec(
                "imca_gateway_storage_server_up",
                "1 while a storage server is used, 0 while it is marked down (it missed a deadline; a probe brings it back)",
                &["server"],
            ),
            fast_failed: series::counter_vec(
                "imca_gateway_storage_fast_failed_total",
                "Storage calls failed with EIO at once because their server was marked down",
                &["server"],
            ),
        }
    }

    pub fn register(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        series::register(registry, &[&self.up, &self.fast_failed])
    }
}

impl Default for HealthMetrics {
    fn default() -> Self {
        HealthMetrics::new()
    }
}
