//! The storage server's own metrics. The rest of its `/metrics` is
//! registered in the same registry by what it runs: protocol-server
//! (`imca_storage_ops_total`, `imca_storage_op_duration_seconds`), SMCache
//! (`imca_storage_cache_ops_total`) and the bank client (`imca_bank_*`).

use prometheus::{IntGauge, Registry};

pub struct Metrics {
    /// `imca_storage_open_fds`: data fds held by the posix fd cache (set at
    /// scrape time by the endpoint's refresh hook)
    pub open_fds: IntGauge,
}

impl Metrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Metrics> {
        let open_fds = IntGauge::new("imca_storage_open_fds", "Data file descriptors held by the fd cache")?;
        registry.register(Box::new(open_fds.clone()))?;
        Ok(Metrics { open_fds })
    }
}
