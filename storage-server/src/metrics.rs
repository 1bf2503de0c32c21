//! The storage server's own metrics. The rest of its `/metrics` is
//! registered in the same registry by what it runs: protocol-server
//! (`imca_storage_ops_total`, `imca_storage_op_duration_seconds`), SMCache
//! (`imca_storage_cache_ops_total`) and the bank client (`imca_bank_*`).

use metric_series as series;
use prometheus::{IntCounterVec, IntGauge, Registry};
use transport::tcp::{Close, ServerStats};

pub struct Metrics {
    /// `imca_storage_open_fds`: data fds held by the posix fd cache (set at
    /// scrape time by the endpoint's refresh hook)
    pub open_fds: IntGauge,
    /// the storage RPC's connections and memory (also set at scrape time)
    pub rpc: RpcMetrics,
}

impl Metrics {
    pub fn register(registry: &Registry) -> prometheus::Result<Metrics> {
        let open_fds = series::gauge("imca_storage_open_fds", "Data file descriptors held by the fd cache");
        series::register(registry, &[&open_fds])?;
        Ok(Metrics { open_fds, rpc: RpcMetrics::register(registry)? })
    }
}

/// Copies of the TCP server's own counters ([`ServerStats`]).
pub struct RpcMetrics {
    connections: IntGauge,
    handshakes: IntGauge,
    buffered: IntGauge,
    closed: IntCounterVec,
}

impl RpcMetrics {
    fn register(registry: &Registry) -> prometheus::Result<RpcMetrics> {
        let connections = series::gauge("imca_storage_rpc_connections", "Established storage RPC connections");
        let handshakes = series::gauge("imca_storage_rpc_handshakes", "Sockets that have not finished the hello yet");
        let buffered = series::gauge(
            "imca_storage_rpc_buffered_bytes",
            "Memory held for clients: requests being received or served, replies not yet read",
        );
        let closed = series::counter_vec(
            "imca_storage_rpc_connections_closed_total",
            "Sockets closed or refused, by reason",
            &["reason"],
        );
        series::register(registry, &[&connections, &handshakes, &buffered, &closed])?;
        Ok(RpcMetrics { connections, handshakes, buffered, closed })
    }

    pub fn refresh(&self, s: &ServerStats) {
        self.connections.set(s.connections() as i64);
        self.handshakes.set(s.handshakes() as i64);
        self.buffered.set(s.buffered_bytes() as i64);
        for why in Close::ALL {
            let c = self.closed.with_label_values(&[why.label()]);
            c.inc_by(s.closed(why).saturating_sub(c.get()));
        }
    }
}
