//! SMCache's metrics: what it asked of the bank, and how that went.

use prometheus::{register_int_counter_vec, IntCounterVec};
use std::sync::LazyLock;

/// `op`: populate (blocks after a read, not waited for), update (blocks
/// rewritten after a write), invalidate (keys deleted after a mutation);
/// `result`: ok | fenced (a node could not confirm in time and was fenced
/// before the mutation was answered) | error (answered EIO: neither
/// confirmed nor fenced in time) | queued.
pub static CACHE_OPS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "imca_storage_cache_ops_total",
        "SMCache's work on the cache bank, by op and result",
        &["op", "result"]
    )
    .expect("metric registers once")
});

pub fn count(op: &str, result: &str, n: u64) {
    if n > 0 {
        CACHE_OPS.with_label_values(&[op, result]).inc_by(n);
    }
}
