//! Connections to the storage servers: one protocol-client leaf each,
//! connected in parallel at start-up so a wrong address fails right away,
//! and one more to the authority for the config lease alone.

use protocol_client::{ClientOptions, ProtocolClient};
use std::sync::Arc;
use std::time::Duration;

pub async fn connect(
    addrs: &[String],
    timeout: Duration,
    rdma: bool,
    auth: Option<secret::Key>,
    tls: Option<transport::tcp::tls::ClientTls>,
    session: u64,
    metrics: protocol_client::HealthMetrics,
) -> anyhow::Result<Vec<Arc<ProtocolClient>>> {
    if addrs.is_empty() {
        anyhow::bail!("--storage-servers lists no server");
    }
    let options = ClientOptions { op_timeout: timeout, connect_timeout: timeout.min(Duration::from_secs(10)), auth, tls, session, metrics };
    let clients = futures::future::join_all(addrs.iter().map(|a| protocol_client::connect_transport(a, options.clone(), rdma))).await;
    clients.into_iter().map(|c| c.map(Arc::new).map_err(Into::into)).collect()
}

/// A connection of its own to the authority (server 0) for the config
/// lease's renewals (`volume::lease`), so they never queue behind the
/// bulk data of the leaves' shared connection. Over TCP only (RDMA: the
/// leaf's connection is used).
pub fn lease_client(
    addr: &str,
    timeout: Duration,
    rdma: bool,
    auth: Option<secret::Key>,
    tls: Option<transport::tcp::tls::ClientTls>,
) -> Option<Arc<ProtocolClient>> {
    // (its own health metrics, unregistered: the leaf's gauge speaks for the server)
    let options = ClientOptions { op_timeout: timeout, connect_timeout: timeout.min(Duration::from_secs(10)), auth, tls, ..Default::default() };
    (!rdma).then(|| Arc::new(ProtocolClient::lazy(addr, options)))
}
