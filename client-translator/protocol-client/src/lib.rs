//! # protocol-client — the gateway's leaf translator for one storage server
//!
//! ```text
//!  gateway: coherence -> io-stats -> CMCache -> stripe -> protocol-client (one per server)
//!                                            ══ RpcClient (TCP now, RDMA later) ══> protocol-server
//! ```
//!
//! Each [`Translator`] call becomes one `wire::Request`, sent over any
//! [`RpcClient`]; many calls share one multiplexed connection. Every reply
//! carries the server's volume-config epoch: the client keeps the highest one
//! seen in a `tokio::sync::watch` so the gateway notices a new cache config
//! (node pool, block size) on the very next reply, and can fetch it with
//! [`ProtocolClient::fetch_volume_config`].
//!
//! Faults: a call that does not complete within the op timeout (default
//! 10 s), or whose connection fails, returns `EIO` to the caller; the next
//! call reconnects (the transport does that). Nothing here ever hangs. A
//! server that stayed silent until the deadline is marked down: its calls
//! fail at once until a background probe gets an answer (`health`). Calls
//! made inside one [`operation`] share its deadline (`deadline`), so an
//! operation of several calls still waits at most the op timeout.

mod client;
pub mod deadline;
mod health;
pub mod metrics;
mod translator;

pub use client::{Callbacks, ClientError, ClientOptions, ProtocolClient, DEFAULT_OP_TIMEOUT};
pub use deadline::operation;
pub use metrics::HealthMetrics;

/// Connect to `addr` over TCP now (handshake + one config fetch), so a
/// wrong address fails at start-up rather than on the first file operation.
pub async fn connect(addr: &str, options: ClientOptions) -> Result<ProtocolClient, ClientError> {
    ProtocolClient::connect(addr, options).await
}

/// Like [`connect`], over RDMA when `rdma` (see `transport::select`), else TCP.
pub async fn connect_transport(addr: &str, options: ClientOptions, rdma: bool) -> Result<ProtocolClient, ClientError> {
    if !rdma {
        return ProtocolClient::connect(addr, options).await;
    }
    let t = options.connect_timeout.min(options.op_timeout);
    let rpc = transport::select::client(true, addr, options.op_timeout, t, options.auth.clone());
    let c = ProtocolClient::new(rpc, &options);
    c.fetch_volume_config().await.map_err(|source| ClientError::Fs { addr: addr.to_string(), source })?;
    Ok(c)
}
