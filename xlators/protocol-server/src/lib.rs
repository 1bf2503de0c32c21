//! # protocol-server — the top of a storage server's graph
//!
//! ```text
//!  transport (TCP/RDMA) ──Message──> protocol-server ──> [SMCache] ──> posix
//!                      <──Message───  (reply stamped with the volume epoch)
//! ```
//!
//! Decodes a storage RPC request, calls the translator below, encodes the
//! reply stamped with the volume's current epoch (so gateways notice a config
//! change on any reply). The volume-config messages are answered from the
//! server's [`Volume`] authority. Counts and times every request in
//! `imca_storage_ops_total` / `imca_storage_op_duration_seconds`.

mod metrics;

use metrics::Metrics;
use volume::Volume;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Instant;
use transport::{Message, RpcService};
use wire::{encode_reply, Reply, ReplyShape, Request};
use xlator::*;

pub struct ProtocolServer {
    top: Arc<dyn Translator>,
    volume: Arc<Volume>,
    metrics: Metrics,
}

impl ProtocolServer {
    /// Serve `top`; request metrics are registered in `registry`.
    pub fn new(top: Arc<dyn Translator>, volume: Arc<Volume>, registry: &prometheus::Registry) -> ProtocolServer {
        ProtocolServer { top, volume, metrics: Metrics::register(registry) }
    }

    async fn dispatch(&self, req: Request) -> FsResult<Reply> {
        match req {
            Request::GetVolumeConfig {} => {
                let config = self.volume.current();
                Ok(Reply::Config { accepted: false, fence: self.volume.fences.open(&config), config })
            }
            Request::SetVolumeConfig { config } => {
                let epoch = config.epoch;
                let (accepted, config) = self.volume.compare_and_set(config).map_err(|e| {
                    tracing::error!("persisting the volume config failed: {e}");
                    FsError::from(e)
                })?;
                if accepted {
                    tracing::info!(epoch, "volume config changed");
                }
                Ok(Reply::Config { accepted, fence: self.volume.fences.open(&config), config })
            }
            file_op => call(&*self.top, file_op).await,
        }
    }
}

macro_rules! call_translator {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        /// A file operation request as a call of the translator below.
        async fn call(x: &dyn Translator, req: Request) -> FsResult<Reply> {
            match req {
                $( Request::$v { $($a),* } => x.$m($($a.as_param()),*).await.map(ReplyShape::into_reply), )*
                Request::GetVolumeConfig {} | Request::SetVolumeConfig { .. } => Err(FsError::ENOSYS),
            }
        }
    };
}

for_each_fop!(call_translator);

#[async_trait]
impl RpcService for ProtocolServer {
    async fn handle(&self, req: Message) -> Message {
        let started = Instant::now();
        let req = match Request::decode(&req) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("undecodable storage request: {e}");
                self.metrics.observe("invalid", false, started.elapsed());
                return encode_reply(self.volume.epoch(), &Err(FsError(libc::EPROTO)));
            }
        };
        let op = req.op();
        let result = self.dispatch(req).await;
        self.metrics.observe(op.name(), result.is_ok(), started.elapsed());
        encode_reply(self.volume.epoch(), &result)
    }

    /// A read's size (the transport reserves that much memory before
    /// handling it); decoding a head is cheap next to serving it.
    fn reply_size_hint(&self, req: &Message) -> usize {
        Request::decode(req).map_or(0, |r| r.reply_bulk_max())
    }
}
