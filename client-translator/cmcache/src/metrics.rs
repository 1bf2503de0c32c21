//! CMCache's metrics: which operations the bank answered. Registered in the
//! gateway's registry (one CMCache per gateway).

use metric_series as series;
use prometheus::{IntCounterVec, Registry};

#[derive(Clone, Debug)]
pub struct Metrics {
    /// `imca_gateway_cache_total{op,result}`: `op` lookup|getattr|read|listing
    /// (a listing's entries, one by one),
    /// `result` hit (answered from the bank) | miss (forwarded to the
    /// storage servers) | bypass (no cache in force) | changing (the first
    /// getattr of a directory after a change through this gateway: asked
    /// of the storage servers directly, see `dirs_changed_here`) | cold (a
    /// read forward of a miss, sent to the servers without asking the
    /// bank, see `cold_reads`).
    pub cache: IntCounterVec,
    /// `imca_gateway_read_bytes_total{source}`: bytes of read replies
    /// assembled from bank blocks vs forwarded (bank | storage).
    pub read_bytes: IntCounterVec,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Metrics {
        let m = Metrics {
            cache: series::counter_vec(
                "imca_gateway_cache_total",
                "Gateway operations answered from the cache bank (hit) or forwarded (miss)",
                &["op", "result"],
            ),
            read_bytes: series::counter_vec("imca_gateway_read_bytes_total", "Read reply bytes by source (bank | storage)", &["source"]),
        };
        // Registration fails only for a duplicate name: one CMCache per registry.
        let _ = series::register(registry, &[&m.cache, &m.read_bytes]);
        m
    }

    pub fn count(&self, op: &str, result: &str) {
        self.cache.with_label_values(&[op, result]).inc();
    }
}
