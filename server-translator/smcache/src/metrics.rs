//! SMCache's metrics: what it asked of the bank, and how that went.
//! Registered in the storage server's registry (one SMCache per server).

use metric_series as series;
use prometheus::{IntCounterVec, Registry};

#[derive(Clone, Debug)]
pub struct Metrics {
    /// `imca_storage_cache_ops_total{op,result}`. `op`: populate (blocks
    /// after a read, or a new file's at its close — result `at_close` —
    /// not waited for), update (blocks rewritten after a
    /// write), invalidate (keys deleted after a mutation); `result`: ok |
    /// fenced (a node could not confirm in time and was fenced before the
    /// mutation was answered) | error (answered EIO: neither confirmed nor
    /// fenced in time) | queued | known_empty (a stat delete skipped: the
    /// key holds nothing, see `known_empty`) | fresh (blocks a write did not
    /// rewrite: the file's were never stored, see `never_cached`).
    pub cache_ops: IntCounterVec,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Metrics {
        let cache_ops =
            series::counter_vec("imca_storage_cache_ops_total", "SMCache's work on the cache bank, by op and result", &["op", "result"]);
        // Registration fails only for a duplicate name: one SMCache per registry.
        let _ = series::register(registry, &[&cache_ops]);
        Metrics { cache_ops }
    }

    pub fn count(&self, op: &str, result: &str, n: u64) {
        if n > 0 {
            self.cache_ops.with_label_values(&[op, result]).inc_by(n);
        }
    }
}
