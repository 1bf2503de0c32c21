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
//!
//! Kernel caching ([`callbacks`]): a request may come in a gateway's session
//! envelope; once a mutation is applied below, the invalidations it causes
//! ([`invalidations`]) reach every other gateway holding a lease before the
//! reply goes out. `Poll` requests renew a gateway's lease and carry its
//! invalidations back.
//!
//! Locks ([`locks`]): getlk/setlk are answered here, from this server's lock
//! table, not by the translators below: a lock belongs to the gateway
//! session the request came in and lasts while that session's lease does.

pub mod callbacks;
pub mod invalidations;
pub mod locks;
mod metrics;
pub mod opens;

use callbacks::Callbacks;
use locks::Locks;
use metrics::Metrics;
use opens::Opens;
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
    callbacks: Callbacks,
    locks: Locks,
    /// each gateway's opens, released when its lease runs out
    opens: Opens,
    metrics: Metrics,
}

impl ProtocolServer {
    /// Serve `top` with the default kernel-cache lease; request metrics are
    /// registered in `registry`.
    pub fn new(top: Arc<dyn Translator>, volume: Arc<Volume>, registry: &prometheus::Registry) -> ProtocolServer {
        ProtocolServer::with_lease(top, volume, callbacks::DEFAULT_LEASE, None, locks::recovery::DEFAULT_GRACE, registry)
    }

    /// Serve `top`, granting gateways kernel-cache leases of `lease`,
    /// recorded in `record` (see [`callbacks`]: a restart's grace period);
    /// beside it the marker that locks may be held, and after a restart
    /// with it a grace of `lock_grace` for gateways to reclaim them
    /// ([`locks::recovery`]).
    pub fn with_lease(
        top: Arc<dyn Translator>,
        volume: Arc<Volume>,
        lease: std::time::Duration,
        record: Option<std::path::PathBuf>,
        lock_grace: std::time::Duration,
        registry: &prometheus::Registry,
    ) -> ProtocolServer {
        let marker = record.as_ref().map(|r| r.with_file_name(locks::recovery::MARKER));
        let callbacks = Callbacks::with_record(lease, record, registry);
        let locks = match marker {
            Some(m) => Locks::with_recovery(callbacks.lease(), m, lock_grace, registry),
            None => Locks::new(callbacks.lease(), registry),
        };
        let opens = Opens::new(callbacks.lease(), registry);
        ProtocolServer { top, volume, callbacks, locks, opens, metrics: Metrics::register(registry) }
    }

    /// Release below what gateways whose lease ran out left open (looked
    /// at once a lease at most; see [`opens`]).
    fn reap_opens(&self) {
        let gone = self.opens.reap(&self.callbacks);
        if gone.is_empty() {
            return;
        }
        let top = self.top.clone();
        tokio::spawn(async move {
            for (fid, n) in gone {
                for _ in 0..n {
                    if let Err(e) = top.release(&Loc::new("", Some(fid))).await {
                        tracing::debug!(?fid, "releasing a lapsed gateway's open: {e:?}");
                    }
                }
            }
        });
    }

    async fn dispatch(&self, session: u64, req: Request) -> FsResult<Reply> {
        self.reap_opens();
        match req {
            // Only in its own envelope: a peer cannot renew another
            // gateway's lease or acknowledge its invalidations.
            Request::Poll { session: s, acked } if s == session => {
                self.locks.tidy();
                self.callbacks.poll(s, acked).await
            }
            Request::Poll { .. } => Err(FsError::EINVAL),
            Request::Hold { session: s, inos } if s == session => self.callbacks.hold(s, &inos),
            Request::Hold { .. } => Err(FsError::EINVAL),
            Request::Unhold { session: s, inos } if s == session => self.callbacks.unhold(s, &inos).map(|()| Reply::Unit),
            Request::Unhold { .. } => Err(FsError::EINVAL),
            Request::Reclaim { loc, lock } => self.locks.reclaim(session, &loc, lock, &self.callbacks).map(|()| Reply::Unit),
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
            Request::Getlk { loc, lock } => self.locks.getlk(session, &loc, lock, &self.callbacks).await.map(Reply::Lock),
            Request::Setlk { loc, lock, wait } => {
                self.locks.setlk(session, &loc, lock, wait, &self.callbacks).await.map(|()| Reply::Unit)
            }
            Request::Release { loc } => match loc.fid {
                Some(fid) if !self.opens.releasing(session, fid) => Ok(Reply::Unit),
                _ => call(&*self.top, Request::Release { loc }).await,
            },
            file_op => {
                // an open or a create counts for its gateway (see `opens`)
                let opening = opens::opening(&file_op);
                if let Some(fid) = opening {
                    self.opens.admit(session, fid)?;
                }
                if let Some(ino) = invalidations::made(&file_op) {
                    self.callbacks.hold_new(session, ino);
                }
                let mutates = invalidations::mutates(&file_op);
                let copy = (mutates || opening.is_some()).then(|| file_op.clone());
                let reply = call(&*self.top, file_op).await?;
                if let Some(copy) = &copy {
                    if let Some(fid) = opens::opened(copy, &reply) {
                        self.opens.opened(session, fid);
                    }
                    if mutates {
                        self.callbacks.invalidate(session, &invalidations::of(copy, &reply)).await;
                    }
                }
                Ok(reply)
            }
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
                | Request::Unhold { .. } | Request::Reclaim { .. } => {
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
                return encode_reply(self.volume.epoch(), &Err(FsError(libc::EPROTO)));
            }
        };
        let op = req.op();
        let result = self.dispatch(session, req).await;
        self.metrics.observe(op.name(), result.is_ok(), started.elapsed());
        encode_reply(self.volume.epoch(), &result)
    }

    /// A read's size (the transport reserves that much memory before
    /// handling it); decoding a head is cheap next to serving it.
    fn reply_size_hint(&self, req: &Message) -> usize {
        Request::decode_in_session(req).map_or(0, |(_, r)| r.reply_bulk_max())
    }
}
