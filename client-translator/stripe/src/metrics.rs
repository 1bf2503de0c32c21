//! stripe's metrics, registered in the gateway's registry (one stripe per
//! gateway). They exist unregistered until [`crate::Stripe::register_metrics`]
//! (in-process tests never register them).

use metric_series as series;
use prometheus::{IntCounter, IntCounterVec, IntGauge, Registry};

#[derive(Clone)]
pub(crate) struct Metrics {
    /// `imca_gateway_heals_pending`: (directory, name) pairs recorded as
    /// left disagreeing and not yet healed ([`crate::pending`])
    pub pending: IntGauge,
    /// `imca_gateway_heal_sweep_needed`: 1 while the index overflowed and a
    /// full sweep is owed
    pub sweep_needed: IntGauge,
    /// `imca_gateway_heals_total{result="done|failed|given_up"}`
    pub heals: IntCounterVec,
    /// `imca_gateway_writes_failed_partway_total`
    pub writes_failed_partway: IntCounter,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            pending: series::gauge(
                "imca_gateway_heals_pending",
                "Names an operation left differing between storage servers, recorded for the background heal and not healed yet",
            ),
            sweep_needed: series::gauge(
                "imca_gateway_heal_sweep_needed",
                "1 while more divergences were recorded than the heal index holds: the background heal owes a full sweep",
            ),
            heals: series::counter_vec(
                "imca_gateway_heals_total",
                "Background heals of recorded divergences, by result (done, failed attempt, given up)",
                &["result"],
            ),
            writes_failed_partway: series::counter(
                "imca_gateway_writes_failed_partway_total",
                "Striped writes some of whose pieces failed: their range may hold old data, new data or a mix (docs/operations.md)",
            ),
        }
    }

    /// Registration fails only for a duplicate name: one stripe per registry.
    pub fn register(&self, registry: &Registry) {
        let _ = series::register(registry, &[&self.pending, &self.sweep_needed, &self.heals, &self.writes_failed_partway]);
    }
}
