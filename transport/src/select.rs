//! Choosing a transport: `--transport tcp|rdma|auto` for every daemon.
//!
//! `auto` uses RDMA when this binary was built with the `rdma` feature and
//! the machine has an RDMA device, else TCP, and logs which it chose and
//! why. `rdma` without both is an error. A server offering RDMA listens on
//! the same IP and port in rdma_cm's port space (separate from TCP's) next to
//! its TCP listener, so one address reaches it either way.

use crate::{tcp, RpcClient, RpcService};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TransportKind {
    #[default]
    Tcp,
    Rdma,
    Auto,
}

impl std::str::FromStr for TransportKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tcp" => Ok(TransportKind::Tcp),
            "rdma" => Ok(TransportKind::Rdma),
            "auto" => Ok(TransportKind::Auto),
            _ => Err(format!("unknown transport {s:?} (expected tcp, rdma or auto)")),
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TransportKind::Tcp => "tcp",
            TransportKind::Rdma => "rdma",
            TransportKind::Auto => "auto",
        })
    }
}

/// Why RDMA cannot be used here, if it cannot.
pub fn rdma_unavailable() -> Option<&'static str> {
    #[cfg(feature = "rdma")]
    {
        if crate::rdma::device_present() {
            None
        } else {
            Some("no RDMA device on this machine")
        }
    }
    #[cfg(not(feature = "rdma"))]
    {
        Some("this binary was built without the `rdma` feature")
    }
}

/// Resolve `auto`; `Ok(true)` means use RDMA. `what` names the daemon in logs.
pub fn use_rdma(kind: TransportKind, what: &str) -> Result<bool, String> {
    match (kind, rdma_unavailable()) {
        (TransportKind::Tcp, _) => Ok(false),
        (TransportKind::Rdma, None) => Ok(true),
        (TransportKind::Rdma, Some(why)) => Err(format!("--transport rdma: {why}")),
        (TransportKind::Auto, None) => {
            tracing::info!("{what}: transport auto -> rdma");
            Ok(true)
        }
        (TransportKind::Auto, Some(why)) => {
            tracing::info!("{what}: transport auto -> tcp ({why})");
            Ok(false)
        }
    }
}

/// A client of `addr` over the chosen transport (connecting on first call).
/// `auth`: the volume's handshake key (`None` only reaches `--insecure` servers).
pub fn client(
    rdma: bool,
    addr: &str,
    call_timeout: Duration,
    connect_timeout: Duration,
    auth: Option<secret::Key>,
) -> Arc<dyn RpcClient> {
    #[cfg(feature = "rdma")]
    if rdma {
        let o = crate::rdma::RdmaOptions { call_timeout, connect_timeout, auth, ..rdma_options_from_env() };
        return Arc::new(crate::rdma::RdmaClient::new(addr, o));
    }
    let _ = rdma;
    Arc::new(tcp::TcpClient::new(addr, tcp::TcpClientOptions { call_timeout, connect_timeout, auth, ..Default::default() }))
}

/// Connect to `addr` over RDMA now (the handshake done), for callers that
/// want the outcome at once rather than at the first call (the cache bank
/// falls back to TCP per node). Errors in a build without the feature.
pub async fn connect_rdma(addr: &str, connect_timeout: Duration) -> Result<Arc<dyn RpcClient>, crate::TransportError> {
    #[cfg(feature = "rdma")]
    {
        let o = crate::rdma::RdmaOptions { connect_timeout, ..rdma_options_from_env() };
        let c: Arc<dyn RpcClient> = Arc::new(crate::rdma::RdmaClient::connect(addr, o).await?);
        Ok(c)
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = (addr, connect_timeout);
        Err(crate::TransportError::Connect("this binary was built without the `rdma` feature".into()))
    }
}

/// Who an RDMA server serves and how much it holds for them (the same
/// `imca storage` flags as its TCP listener's).
#[derive(Clone, Debug, Default)]
pub struct RdmaServe {
    /// the volume's handshake key (`None`: `--insecure`, or a cache node)
    pub auth: Option<secret::Key>,
    /// `--auth-allow`
    pub allow: Vec<crate::allow::Cidr>,
    /// `--max-connections` (`None`: the transport's default)
    pub max_connections: Option<usize>,
    /// `--rpc-memory`: pulled request bulks held at once
    pub memory: Option<usize>,
}

/// Serve `service` over RDMA on `addr` (e.g. the TCP listener's ip:port;
/// port 0 picks one) until `shutdown`. Returns the bound address once
/// listening; errors if the address has no RDMA device.
pub async fn serve_rdma(
    addr: std::net::SocketAddr,
    service: Arc<dyn RpcService>,
    limits: RdmaServe,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    #[cfg(feature = "rdma")]
    {
        let l = crate::rdma::RdmaListener::bind(&addr.to_string()).await?;
        let at = l.local_addr();
        let d = rdma_options_from_env();
        let opts = crate::rdma::RdmaOptions {
            auth: limits.auth,
            allow: limits.allow,
            max_connections: limits.max_connections.unwrap_or(d.max_connections),
            memory: limits.memory.unwrap_or(d.memory),
            ..d
        };
        let task = tokio::spawn(async move {
            if let Err(e) = crate::rdma::serve(l, service, opts, shutdown).await {
                tracing::error!(%at, "RDMA server failed: {e}");
            }
        });
        Ok((at, task))
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = (addr, service, limits, shutdown);
        Err(std::io::Error::other("this binary was built without the `rdma` feature"))
    }
}

/// Options from the environment: IMCA_RDMA_ACK_TIMEOUT, IMCA_RDMA_RETRY_CNT,
/// IMCA_RDMA_GID_INDEX (e.g. the soft-RoCE VM needs ACK timeout 19, retry 7).
#[cfg(feature = "rdma")]
pub fn rdma_options_from_env() -> crate::rdma::RdmaOptions {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u8>().ok());
    let d = crate::rdma::RdmaOptions::default();
    crate::rdma::RdmaOptions {
        ack_timeout: env("IMCA_RDMA_ACK_TIMEOUT").unwrap_or(d.ack_timeout),
        retry_cnt: env("IMCA_RDMA_RETRY_CNT").unwrap_or(d.retry_cnt),
        gid_index: env("IMCA_RDMA_GID_INDEX").or(d.gid_index),
        ..d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves() {
        assert_eq!("auto".parse::<TransportKind>().unwrap(), TransportKind::Auto);
        assert!("udp".parse::<TransportKind>().is_err());
        assert_eq!(use_rdma(TransportKind::Tcp, "t"), Ok(false));
        // this machine (and CI) has no RDMA: auto falls back, rdma refuses
        if rdma_unavailable().is_some() {
            assert_eq!(use_rdma(TransportKind::Auto, "t"), Ok(false));
            assert!(use_rdma(TransportKind::Rdma, "t").is_err());
        }
    }
}
