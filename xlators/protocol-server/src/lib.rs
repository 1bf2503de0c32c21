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
use wire::{encode_reply, Reply, Request};
use xlator::{FsError, FsResult, Translator};

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
        let x = &*self.top;
        use Reply as R;
        use Request::*;
        Ok(match req {
            Lookup { parent, name } => R::Attr(x.lookup(&parent, &name).await?),
            Getattr { loc } => R::Attr(x.getattr(&loc).await?),
            Setattr { loc, set } => R::Attr(x.setattr(&loc, &set).await?),
            Readlink { loc } => R::Target(x.readlink(&loc).await?),
            Mknod { parent, new, mode, rdev } => R::Attr(x.mknod(&parent, &new, mode, rdev).await?),
            Mkdir { parent, new } => R::Attr(x.mkdir(&parent, &new).await?),
            Create { parent, new, flags } => R::Attr(x.create(&parent, &new, flags).await?),
            Symlink { parent, new, target } => R::Attr(x.symlink(&parent, &new, &target).await?),
            Link { loc, newparent, newname } => R::Attr(x.link(&loc, &newparent, &newname).await?),
            Unlink { parent, name } => R::Removed(x.unlink(&parent, &name).await?),
            Rmdir { parent, name } => R::Removed(x.rmdir(&parent, &name).await?),
            Rename { parent, name, newparent, newname, flags } => {
                R::Renamed(x.rename(&parent, &name, &newparent, &newname, flags).await?)
            }
            Open { loc, flags } => {
                x.open(&loc, flags).await?;
                R::Unit
            }
            Release { loc } => {
                x.release(&loc).await?;
                R::Unit
            }
            Read { loc, offset, size } => R::Data(x.read(&loc, offset, size).await?),
            Write { loc, offset, data } => R::Written(x.write(&loc, offset, data).await?),
            Flush { loc } => {
                x.flush(&loc).await?;
                R::Unit
            }
            Fsync { loc, datasync } => {
                x.fsync(&loc, datasync).await?;
                R::Unit
            }
            Readdir { loc, cookie, max, plus } => R::Entries(x.readdir(&loc, cookie, max, plus).await?),
            Statfs { loc } => R::StatFs(x.statfs(&loc).await?),
            Setxattr { loc, name, flags, value } => {
                x.setxattr(&loc, &name, &value, flags).await?;
                R::Unit
            }
            Getxattr { loc, name } => R::Data(x.getxattr(&loc, &name).await?),
            Listxattr { loc } => R::Names(x.listxattr(&loc).await?),
            Removexattr { loc, name } => {
                x.removexattr(&loc, &name).await?;
                R::Unit
            }
            GetVolumeConfig {} => {
                let config = self.volume.current();
                R::Config { accepted: false, fence: self.volume.fences.open(&config), config }
            }
            SetVolumeConfig { config } => {
                let epoch = config.epoch;
                let (accepted, config) = self.volume.compare_and_set(config).map_err(|e| {
                    tracing::error!("persisting the volume config failed: {e}");
                    FsError::from(e)
                })?;
                if accepted {
                    tracing::info!(epoch, "volume config changed");
                }
                R::Config { accepted, fence: self.volume.fences.open(&config), config }
            }
        })
    }
}

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
}
