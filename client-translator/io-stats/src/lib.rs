//! # io-stats — the top of the client graph (GlusterFS's `debug/io-stats`)
//!
//! ```text
//!  FUSE ──> io-stats ──> CMCache ──> stripe ──> protocol-client × S
//! ```
//!
//! Counts every operation by result and times it, then passes it on. One
//! [`Around`] hook does it for every operation of the op table;
//! [`IoStats::new`] puts it in the graph.

mod metrics;

use metrics::Metrics;
use std::future::Future;
use std::time::Instant;
use xlator::*;

/// The io-stats hook.
pub struct IoStats {
    metrics: Metrics,
}

impl IoStats {
    /// io-stats over `next`, counting into `registry` (the gateway's).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(next: Next, registry: &prometheus::Registry) -> Wrap<IoStats> {
        Wrap::new(IoStats { metrics: metrics::register(registry) }, next)
    }
}

/// A bounded set of `result` label values.
fn result_label<T>(r: &FsResult<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => match *e {
            FsError::ENOENT => "enoent",
            FsError::EEXIST => "eexist",
            FsError::EIO => "eio",
            FsError::ENOTEMPTY => "enotempty",
            FsError::ENODATA => "enodata",
            FsError::EACCES | FsError::EPERM => "eacces",
            FsError::ENOSPC => "enospc",
            _ => "error",
        },
    }
}

impl Around for IoStats {
    fn name(&self) -> &str {
        "io-stats"
    }

    async fn around<'a, T: Send + 'a>(&'a self, fop: Fop, call: impl Future<Output = FsResult<T>> + Send + 'a) -> FsResult<T> {
        let start = Instant::now();
        let r = call.await;
        self.metrics.observe(fop.name(), result_label(&r), start.elapsed());
        r
    }
}
