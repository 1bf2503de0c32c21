//! Connections to the storage servers: one protocol-client leaf each,
//! connected in parallel at start-up so a wrong address fails right away.

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
