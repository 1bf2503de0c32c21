//! The storage RPC's resource limits as `imca storage` flags: how much
//! memory clients may make the server hold, how large a frame may be, and
//! when a quiet connection is closed. (`--max-connections` sits with the
//! other flags in [`Args`](crate::Args).) The mechanisms are the
//! transport's (`transport::tcp`, "Bounded resources").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use transport::tcp::{self, parse_size, ServerOptions, ServerStats};

#[derive(clap::Args, Debug, Clone)]
pub struct RpcLimits {
    // Gateways reconnect on their own, so this never costs them a failed call.
    /// Close a client connection idle, or whose frame or replies stopped
    /// moving, for SECS (0: never; also takes "500ms").
    #[arg(long, value_name = "SECS", env = "IMCA_IDLE_TIMEOUT", default_value = "60", value_parser = parse_secs)]
    pub idle_timeout: Duration,
    /// Largest request (header + data) accepted, announced to clients when
    /// they connect; a larger one drops its connection. Accepts K, M, G.
    #[arg(long, value_name = "BYTES", env = "IMCA_MAX_FRAME", default_value = "64M", value_parser = parse_size)]
    pub max_frame: usize,
    /// Memory one client connection may make the server hold (requests
    /// being received or served, replies not yet read). When it is used
    /// up the server stops reading that connection until its client reads
    /// its replies. Accepts K, M, G.
    #[arg(long, value_name = "BYTES", env = "IMCA_CONN_MEMORY", default_value = "64M", value_parser = parse_size)]
    pub conn_memory: usize,
    /// Memory all client connections together may make the server hold;
    /// a quarter is kept for requests and replies up to 128 KiB, so
    /// metadata keeps flowing when large transfers wait. Accepts K, M, G.
    #[arg(long, value_name = "BYTES", env = "IMCA_RPC_MEMORY", default_value = "256M", value_parser = parse_size)]
    pub rpc_memory: usize,
    /// Serve the storage RPC over TLS 1.3 with this certificate (PEM; it
    /// must name the address gateways use). Needs --tls-key; gateways then
    /// need --tls-ca. RDMA is not encrypted.
    #[arg(long, value_name = "FILE", env = "IMCA_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", env = "IMCA_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Accept storage RPC connections (TCP and RDMA) only from these client
    /// networks, e.g. 10.0.0.0/8,192.168.1.7 (GlusterFS auth.allow). Others
    /// are closed at once. Default: any address.
    #[arg(long, value_name = "CIDR,...", env = "IMCA_AUTH_ALLOW", value_delimiter = ',')]
    pub auth_allow: Vec<transport::allow::Cidr>,
}

impl Default for RpcLimits {
    fn default() -> Self {
        RpcLimits {
            idle_timeout: tcp::DEFAULT_IDLE_TIMEOUT,
            max_frame: tcp::DEFAULT_MAX_FRAME,
            conn_memory: tcp::DEFAULT_CONN_MEMORY,
            rpc_memory: tcp::DEFAULT_SERVER_MEMORY,
            tls_cert: None,
            tls_key: None,
            auth_allow: Vec::new(),
        }
    }
}

impl RpcLimits {
    /// The TCP server's options, counting into `stats`.
    pub fn server_options(&self, max_connections: usize, stats: Arc<ServerStats>) -> anyhow::Result<ServerOptions> {
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Some(tcp::tls::ServerTls::from_files(c, k).map_err(anyhow::Error::msg)?),
            _ => None,
        };
        Ok(ServerOptions {
            max_connections,
            max_frame: self.max_frame,
            idle_timeout: (!self.idle_timeout.is_zero()).then_some(self.idle_timeout),
            conn_memory: self.conn_memory,
            memory: self.rpc_memory,
            stats,
            tls,
            allow: self.auth_allow.clone(),
            ..Default::default()
        })
    }
}

/// "60" (seconds) or "500ms".
fn parse_secs(s: &str) -> Result<Duration, String> {
    let bad = |e| format!("bad duration {s:?}: {e} (seconds, or milliseconds with \"ms\")");
    match s.trim().strip_suffix("ms") {
        Some(ms) => ms.trim().parse().map(Duration::from_millis).map_err(bad),
        None => s.trim().trim_end_matches('s').parse().map(Duration::from_secs).map_err(bad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse() {
        assert_eq!(parse_secs("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_secs("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_secs("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_secs("soon").is_err());
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        let o = RpcLimits { idle_timeout: Duration::ZERO, ..Default::default() }.server_options(7, Default::default()).unwrap();
        assert_eq!((o.idle_timeout, o.max_connections), (None, 7), "0 means never");
    }
}
