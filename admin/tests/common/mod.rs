//! An in-memory [`AdminBackend`] for the HTTP layer's tests: a config that
//! changes by compare-and-set, and counters of what was applied and flushed.
#![allow(dead_code)]

use admin::{AdminBackend, AdminError, FlushReport, Limits, NodeFlush, NodeStatus, Status};
use async_trait::async_trait;
use std::sync::Mutex;
use volume::CacheConfig;

#[derive(Default)]
pub struct Fake {
    pub cfg: Mutex<CacheConfig>,
    pub applied: Mutex<u32>,
    pub flushed: Mutex<u32>,
}

#[async_trait]
impl AdminBackend for Fake {
    async fn status(&self) -> Result<Status, AdminError> {
        let c = self.cfg.lock().unwrap().clone();
        Ok(Status {
            volume: c.volume.clone(),
            epoch: c.epoch,
            cache_nodes: c.nodes.iter().map(|n| NodeStatus { addr: n.clone(), healthy: true, ..Default::default() }).collect(),
            config: c,
            pipeline: vec!["io-stats".into(), "cmcache".into(), "stripe".into()],
            ..Default::default()
        })
    }
    async fn config(&self) -> Result<CacheConfig, AdminError> {
        Ok(self.cfg.lock().unwrap().clone())
    }
    async fn limits(&self, _nodes: &[String]) -> Limits {
        Limits::default()
    }
    async fn apply_config(&self, proposed: CacheConfig) -> Result<CacheConfig, AdminError> {
        let mut g = self.cfg.lock().unwrap();
        if g.epoch != proposed.epoch {
            return Err(AdminError::Conflict("moved".into()));
        }
        *g = CacheConfig { epoch: proposed.epoch + 1, ..proposed };
        *self.applied.lock().unwrap() += 1;
        Ok(g.clone())
    }
    async fn flush(&self) -> Result<FlushReport, AdminError> {
        *self.flushed.lock().unwrap() += 1;
        let c = self.cfg.lock().unwrap().clone();
        Ok(FlushReport { epoch: c.epoch, nodes: c.nodes.iter().map(|n| NodeFlush { addr: n.clone(), ok: true, error: None }).collect() })
    }
}
