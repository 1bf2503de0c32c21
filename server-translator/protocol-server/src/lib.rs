//! # protocol-server — the top of a storage server's graph: codec and dispatch
//!
//! ```text
//!  transport (TCP/RDMA) ──Message──> protocol-server ──fop──> locks -> gateway-opens -> upcall -> SMCache -> posix
//!                      <──Message───  (reply stamped       │
//!                                      with the epoch)     └─ not a fop ──> the handle of the translator
//!                                                              that owns the state (Controls)
//! ```
//!
//! Decodes a storage RPC request, encodes the reply stamped with the
//! volume's current epoch (so gateways notice a config change on any reply),
//! and counts and times every request in `imca_storage_ops_total` /
//! `imca_storage_op_duration_seconds`. A file operation becomes a call of
//! the translator below, generated from the op table (`call`), inside the
//! scope of the gateway session its envelope names ([`upcall::session`]):
//! the translators that keep per-gateway state read it there. The requests
//! that are not file operations are answered by whoever owns their state,
//! reached through [`Controls`]: Poll, Hold and Unhold by the lease table
//! (upcall), Reclaim by the lock table (locks), the volume config by the
//! server's [`Volume`] authority.

mod metrics;

use async_trait::async_trait;
use gateway_opens::GatewayOpens;
use locks::Locks;
use metrics::Metrics;
use std::sync::Arc;
use std::time::Instant;
use transport::{Message, RpcService};
use upcall::{session, Leases};
use volume::Volume;
use wire::{encode_reply, Reply, ReplyShape, Request};
use xlator::*;

/// The handles of the translators that answer what is not a file
/// operation (given when the graph is built: storage-server's `graph`).
pub struct Controls {
    /// Poll, Hold, Unhold
    pub leases: Arc<Leases>,
    /// Reclaim, and the marker's tidying on each poll
    pub locks: Arc<Locks>,
    /// hears of every request (gateways' polls keep its clock; see `GatewayOpens::tick`)
    pub opens: Arc<GatewayOpens>,
    /// GetVolumeConfig, SetVolumeConfig
    pub volume: Arc<Volume>,
}

pub struct ProtocolServer {
    top: Next,
    controls: Controls,
    metrics: Metrics,
}

impl ProtocolServer {
    /// Serve the graph `top`; request metrics are registered in `registry`.
    pub fn new(top: Next, controls: Controls, registry: &prometheus::Registry) -> ProtocolServer {
        ProtocolServer { top, controls, metrics: Metrics::register(registry) }
    }

    async fn dispatch(&self, session: u64, req: Request) -> FsResult<Reply> {
        let c = &self.controls;
        c.opens.tick();
        match req {
            // Only in its own envelope: a peer cannot renew another
            // gateway's lease or acknowledge its invalidations.
            Request::Poll { session: s, acked } if s == session => {
                c.locks.tidy();
                c.leases.poll(s, acked).await
            }
            Request::Hold { session: s, inos } if s == session => c.leases.hold(s, &inos),
            Request::Unhold { session: s, inos } if s == session => c.leases.unhold(s, &inos).map(|()| Reply::Unit),
            Request::Poll { .. } | Request::Hold { .. } | Request::Unhold { .. } => Err(FsError::EINVAL),
            Request::Reclaim { loc, lock } => c.locks.reclaim(session, &loc, lock).map(|()| Reply::Unit),
            Request::Releases { locs } if locs.len() <= wire::MAX_RELEASES => {
                // each as its own release, in order (a failed one is the
                // gateway's to log: it answered the kernel long ago)
                session::scope(session, async {
                    for loc in &locs {
                        let _ = self.top.release(loc).await;
                    }
                })
                .await;
                Ok(Reply::Unit)
            }
            Request::Releases { .. } => Err(FsError::EINVAL),
            Request::GetVolumeConfig {} => {
                let config = c.volume.current();
                Ok(Reply::Config { accepted: false, fence: c.volume.fences.open(&config), config })
            }
            Request::SetVolumeConfig { config } => {
                let epoch = config.epoch;
                let (accepted, config) = c.volume.compare_and_set(config).map_err(|e| {
                    tracing::error!("persisting the volume config failed: {e}");
                    FsError::from(e)
                })?;
                if accepted {
                    tracing::info!(epoch, "volume config changed");
                }
                Ok(Reply::Config { accepted, fence: c.volume.fences.open(&config), config })
            }
            file_op => session::scope(session, call(&*self.top, file_op)).await,
        }
    }
}

macro_rules! call_translator {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        /// A file operation request as a call of the translator below.
        async fn call(x: &dyn Translator, req: Request) -> FsResult<Reply> {
            match req {
                $( Request::$v { $($a),* } => x.$m($($a.as_param()),*).await.map(ReplyShape::into_reply), )*
                Request::GetVolumeConfig {} | Request::SetVolumeConfig { .. } | Request::Poll { .. } | Request::Hold { .. }
                | Request::Unhold { .. } | Request::Reclaim { .. } | Request::Releases { .. } => {
                    Err(FsError::ENOSYS)
                }
            }
        }
    };
}

for_each_fop!(call_translator);

#[async_trait]
impl RpcService for ProtocolServer {
    async fn handle(&self, req: Message) -> Message {
        let started = Instant::now();
        let (session, req) = match Request::decode_in_session(&req) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("undecodable storage request: {e}");
                self.metrics.observe("invalid", false, started.elapsed());
                return encode_reply(self.controls.volume.epoch(), &Err(FsError(libc::EPROTO)));
            }
        };
        let op = req.op();
        let result = self.dispatch(session, req).await;
        self.metrics.observe(op.name(), result.is_ok(), started.elapsed());
        encode_reply(self.controls.volume.epoch(), &result)
    }

    /// A read's size (the transport reserves that much memory before
    /// handling it); decoding a head is cheap next to serving it.
    fn reply_size_hint(&self, req: &Message) -> usize {
        Request::decode_in_session(req).map_or(0, |(_, r)| r.reply_bulk_max())
    }
}
