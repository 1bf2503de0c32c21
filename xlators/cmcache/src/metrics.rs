//! CMCache's metrics: which operations the bank answered.

use prometheus::{register_int_counter_vec, IntCounterVec};
use std::sync::LazyLock;

/// `op` lookup|getattr|read, `result` hit (answered from the bank) |
/// miss (forwarded to the storage servers) | bypass (no cache in force).
pub static CACHE: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "imca_gateway_cache_total",
        "Gateway operations answered from the cache bank (hit) or forwarded (miss)",
        &["op", "result"]
    )
    .expect("metric registers once")
});

/// Bytes of read replies assembled from bank blocks vs forwarded.
pub static READ_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "imca_gateway_read_bytes_total",
        "Read reply bytes by source (bank | storage)",
        &["source"]
    )
    .expect("metric registers once")
});

pub fn count(op: &str, result: &str) {
    CACHE.with_label_values(&[op, result]).inc();
}
