//! Connection handling, the call path and the volume-config accessors.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use transport::tcp::{TcpClient, TcpClientOptions};
use transport::{RpcClient, TransportError};
use wire::{decode_reply, Invalidation, Reply, Request};
use volume::CacheConfig;
use xlator::{FsError, FsResult};
use crate::deadline;
use crate::health::Health;

pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// A call slower than this fails with EIO (connecting included).
    pub op_timeout: Duration,
    /// Bound on connecting + handshake.
    pub connect_timeout: Duration,
    /// The volume's handshake key (`secret::Purpose::RpcHandshake`): the
    /// server must prove it holds it, and so do we. `None`: `--insecure`.
    pub auth: Option<secret::Key>,
    /// TLS under the RPC (TCP only); `None`: plain TCP.
    pub tls: Option<transport::tcp::tls::ClientTls>,
    /// The gateway's kernel-cache session (`wire::NO_SESSION`: none): every
    /// request says which gateway asks, so the server calls back the others.
    pub session: u64,
    /// where the server's up/down state and fast-failed calls are counted
    pub metrics: crate::HealthMetrics,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            op_timeout: DEFAULT_OP_TIMEOUT,
            connect_timeout: Duration::from_secs(5),
            auth: None,
            tls: None,
            session: wire::NO_SESSION,
            metrics: crate::HealthMetrics::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // The source is not repeated in the message: `{:#}` (anyhow, logs)
    // prints the chain, and would show it twice.
    #[error("storage server {addr}")]
    Transport { addr: String, source: TransportError },
    #[error("storage server {addr}")]
    Fs { addr: String, source: FsError },
}

/// A leaf translator speaking the storage RPC to one server.
pub struct ProtocolClient {
    rpc: Arc<dyn RpcClient>,
    op_timeout: Duration,
    epoch: watch::Sender<u64>,
    name: String,
    session: u64,
    /// marked down after a missed deadline, up again by a probe (`health`)
    health: Arc<Health>,
}

/// A poll's answer (see `upcall::leases`).
#[derive(Clone, Debug, PartialEq)]
pub struct Callbacks {
    /// the lease, counted from when the poll was sent
    pub lease: Duration,
    /// acknowledge with this in the next poll, once `items` are applied
    pub seq: u64,
    /// the server did not know this session: invalidations may have been missed
    pub fresh: bool,
    pub items: Vec<Invalidation>,
}

impl ProtocolClient {
    /// Over any transport.
    pub fn new(rpc: Arc<dyn RpcClient>, options: &ClientOptions) -> ProtocolClient {
        let name = format!("protocol-client({})", rpc.describe());
        let health = Arc::new(Health::new(&rpc.describe(), &options.metrics));
        ProtocolClient { rpc, op_timeout: options.op_timeout, epoch: watch::Sender::new(0), name, session: options.session, health }
    }

    /// Over TCP, connecting on the first call.
    pub fn lazy(addr: &str, options: ClientOptions) -> ProtocolClient {
        ProtocolClient::new(Arc::new(TcpClient::new(addr, tcp_options(&options))), &options)
    }

    /// Over TCP, connected and with the volume epoch learned.
    pub async fn connect(addr: &str, options: ClientOptions) -> Result<ProtocolClient, ClientError> {
        let tcp = TcpClient::connect(addr, tcp_options(&options))
            .await
            .map_err(|source| ClientError::Transport { addr: addr.to_string(), source })?;
        let c = ProtocolClient::new(Arc::new(tcp), &options);
        c.fetch_volume_config().await.map_err(|source| ClientError::Fs { addr: addr.to_string(), source })?;
        Ok(c)
    }

    /// The transport and peer, for logs and status.
    pub fn describe(&self) -> String {
        self.rpc.describe()
    }

    /// How long this server has been marked down (`None`: it is used).
    pub fn down_for(&self) -> Option<Duration> {
        self.health.down_for()
    }

    /// The highest volume-config epoch any reply has carried (0 = none yet).
    pub fn epoch(&self) -> u64 {
        *self.epoch.borrow()
    }

    /// Changes whenever a reply carries a newer epoch than seen before.
    pub fn epoch_watch(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    pub async fn fetch_volume_config(&self) -> FsResult<CacheConfig> {
        Ok(self.fetch_volume_config_and_fences().await?.0)
    }

    /// The config and the cache nodes this server asks to have fenced.
    pub async fn fetch_volume_config_and_fences(&self) -> FsResult<(CacheConfig, Vec<String>)> {
        match self.call(Request::GetVolumeConfig {}, 0).await? {
            Reply::Config { config, fence, .. } => Ok((config, fence)),
            other => Err(self.unexpected("get_volume_config", &other)),
        }
    }

    /// Compare-and-set: accepted only if `config.epoch` is newer than the
    /// server's current epoch. Returns (accepted, the server's config now).
    pub async fn set_volume_config(&self, config: CacheConfig) -> FsResult<(bool, CacheConfig)> {
        match self.call(Request::SetVolumeConfig { config }, 0).await? {
            Reply::Config { accepted, config, .. } => Ok((accepted, config)),
            other => Err(self.unexpected("set_volume_config", &other)),
        }
    }

    /// Renew this gateway's kernel-cache lease and acknowledge the
    /// invalidations up to `acked`; answers the next ones (the server holds
    /// a quiet poll for a quarter lease).
    pub async fn poll(&self, acked: u64) -> FsResult<Callbacks> {
        match self.call(Request::Poll { session: self.session, acked }, 0).await? {
            Reply::Callbacks { lease_ms, seq, fresh, items } => {
                Ok(Callbacks { lease: Duration::from_millis(lease_ms.into()), seq, fresh, items })
            }
            other => Err(self.unexpected("poll", &other)),
        }
    }

    /// Tell the server this gateway is about to let its kernel cache
    /// `inos`; answers the seq of the last invalidation queued for it then
    /// (applied before holding them), and whether the server waits for it
    /// on every change anyway.
    pub async fn hold(&self, inos: Vec<u64>) -> FsResult<(u64, bool)> {
        match self.call(Request::Hold { session: self.session, inos }, 0).await? {
            Reply::Held { seq, everything } => Ok((seq, everything)),
            other => Err(self.unexpected("hold", &other)),
        }
    }

    /// Tell the server this gateway's kernel dropped `inos`.
    pub async fn unhold(&self, inos: Vec<u64>) -> FsResult<()> {
        match self.call(Request::Unhold { session: self.session, inos }, 0).await? {
            Reply::Unit => Ok(()),
            other => Err(self.unexpected("unhold", &other)),
        }
    }

    /// The kernel closed the files at `locs`: a release of each, in one
    /// message (at most [`wire::MAX_RELEASES`]).
    pub async fn releases(&self, locs: Vec<xlator::Loc>) -> FsResult<()> {
        match self.call(Request::Releases { locs }, 0).await? {
            Reply::Unit => Ok(()),
            other => Err(self.unexpected("releases", &other)),
        }
    }

    /// Ask back `lock`, granted to one of this gateway's owners before the
    /// server restarted (ENOLCK: it is lost; see the `locks` server translator).
    pub async fn reclaim(&self, loc: xlator::Loc, lock: xlator::Lock) -> FsResult<()> {
        match self.call(Request::Reclaim { loc, lock }, 0).await? {
            Reply::Unit => Ok(()),
            other => Err(self.unexpected("reclaim", &other)),
        }
    }

    /// One round trip. Transport failures and timeouts become EIO; so does
    /// any call while the server is marked down (see `health`). A call
    /// waits at most what its operation has left of the op timeout
    /// (`deadline`).
    pub(crate) async fn call(&self, req: Request, reply_bulk_max: usize) -> FsResult<Reply> {
        let op = req.op();
        if self.health.is_down() {
            self.health.count_fast_fail();
            return Err(FsError::EIO);
        }
        let held = held_on_purpose(&req);
        let budget = deadline::remaining(self.op_timeout);
        let msg = req.encode_in_session(self.session);
        let started = tokio::time::Instant::now();
        let missed = |what: &str| {
            tracing::warn!(server = %self.rpc.describe(), op = op.name(), "storage call {what} after {:?}", started.elapsed());
            // Only a server silent for a good part of the whole op timeout
            // is taken for down: not one whose caller had little time left,
            // nor one holding a request on purpose.
            if !held && started.elapsed() >= self.op_timeout / 2 {
                self.health.mark_down(&self.rpc, self.op_timeout, self.session);
            }
            FsError::EIO
        };
        let reply = match tokio::time::timeout(budget, self.rpc.call(msg, reply_bulk_max)).await {
            Ok(Ok(m)) => m,
            Ok(Err(e @ TransportError::Timeout(_))) => return Err(missed(&format!("failed ({e})"))),
            Ok(Err(TransportError::Connect(e))) if e.contains("timed out") => return Err(missed(&format!("failed ({e})"))),
            Ok(Err(e)) => {
                tracing::warn!(server = %self.rpc.describe(), op = op.name(), "storage call failed: {e}");
                return Err(FsError::EIO);
            }
            Err(_) => return Err(missed("timed out")),
        };
        let r = decode_reply(&reply).map_err(|e| {
            tracing::warn!(server = %self.rpc.describe(), op = op.name(), "undecodable reply: {e}");
            FsError::EIO
        })?;
        self.epoch.send_if_modified(|cur| {
            if r.epoch > *cur {
                *cur = r.epoch;
                true
            } else {
                false
            }
        });
        r.result
    }

    pub(crate) fn unexpected(&self, op: &str, got: &Reply) -> FsError {
        tracing::warn!(server = %self.rpc.describe(), op, "reply of the wrong kind: {got:?}");
        FsError::EIO
    }

    pub(crate) fn label(&self) -> &str {
        &self.name
    }
}

/// Requests a server may hold before answering (a poll for a quarter lease,
/// a blocking lock for a few seconds): their silence says nothing of its health.
fn held_on_purpose(req: &Request) -> bool {
    // a getlk waits out a lock grace after the server restarted (≤ its HOLD)
    matches!(req, Request::Poll { .. } | Request::Setlk { wait: true, .. } | Request::Getlk { .. })
}

fn tcp_options(o: &ClientOptions) -> TcpClientOptions {
    TcpClientOptions {
        call_timeout: o.op_timeout,
        connect_timeout: o.connect_timeout.min(o.op_timeout),
        auth: o.auth.clone(),
        tls: o.tls.clone(),
        ..Default::default()
    }
}
