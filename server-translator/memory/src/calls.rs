//! Per-operation call counts: what reached the leaf. Tests of a caching
//! translator assert on these ("the second getattr never got here").

use std::sync::atomic::{AtomicU64, Ordering};
use xlator::Fop;

pub(crate) struct Calls([AtomicU64; Fop::ALL.len()]);

impl Default for Calls {
    fn default() -> Self {
        Calls(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl Calls {
    pub(crate) fn inc(&self, op: Fop) {
        self.0[op as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, op: Fop) -> u64 {
        self.0[op as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}
