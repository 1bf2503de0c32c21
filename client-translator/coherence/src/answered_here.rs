//! What the gateway answered by itself, without a storage server or the
//! bank: the memo's re-validations, the absent names of directories made
//! here, the "no capability" answers before writes (and "no SELinux label"
//! to `ls -l`), the reads of small files written here, and the names the
//! stat-ahead listings remembered. Not seen by io-stats (these requests
//! never get past the coherence translator), so counted here for the operator.
//!
//! `imca_gateway_answered_here_total{op}`: op lookup | lookup_absent |
//! getattr | capability | selinux | read; `imca_gateway_stat_ahead_entries_total`;
//! `imca_gateway_dir_attrs_ahead_total` (a directory's attributes fetched
//! right after a name was added to it here, and remembered).

use prometheus::{IntCounter, IntCounterVec, Registry};

pub struct AnsweredHere {
    pub lookup: IntCounter,
    pub lookup_absent: IntCounter,
    pub getattr: IntCounter,
    pub capability: IntCounter,
    pub selinux: IntCounter,
    pub read: IntCounter,
    answered: IntCounterVec,
    pub stat_ahead: IntCounter,
    pub dir_ahead: IntCounter,
}

impl Default for AnsweredHere {
    fn default() -> AnsweredHere {
        let answered = metric_series::counter_vec("imca_gateway_answered_here_total", "FUSE requests the gateway answered from what it remembers, by operation", &["op"]);
        let op = |o: &str| answered.with_label_values(&[o]);
        AnsweredHere {
            lookup: op("lookup"),
            lookup_absent: op("lookup_absent"),
            getattr: op("getattr"),
            capability: op("capability"),
            selinux: op("selinux"),
            read: op("read"),
            stat_ahead: metric_series::counter("imca_gateway_stat_ahead_entries_total", "Directory entries listed ahead of a walk's lookups"),
            dir_ahead: metric_series::counter("imca_gateway_dir_attrs_ahead_total", "Directories' attributes after a change through this gateway, remembered before the kernel asks: carried by the change's answer, or fetched right after it"),
            answered,
        }
    }
}

impl AnsweredHere {
    /// Show the counters in `registry` (they count from the start either way).
    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.answered.clone()))?;
        registry.register(Box::new(self.stat_ahead.clone()))?;
        registry.register(Box::new(self.dir_ahead.clone()))
    }
}
