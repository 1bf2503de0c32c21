//! The whole translator pipeline in one process, minus FUSE and the wire:
//!
//! ```text
//!  gateway g: CMCache(g) -> stripe -> [SMCache(s) -> posix(s)] for each server s
//!  oracle:               stripe -> [posix(s)]                  (no cache at all)
//! ```

use super::bank::{BankNode, NodeKind};
use cmcache::CmCache;
use smcache::{SmCache, SmOptions};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use volume::{CacheConfig, Placement};
use xlator::Next;

/// Every bank of the pipeline MACs its values with the volume's key, as
/// deployed daemons do (a daemon gets it from `--secret-file`).
pub fn bank_options() -> cache_bank::BankOptions {
    let secret = secret::Secret::from_bytes(&[0xc0; 32]).unwrap();
    cache_bank::BankOptions { value_key: Some(secret.key(secret::Purpose::BankValues)), ..Default::default() }
}

pub struct Pipeline {
    pub nodes: Vec<BankNode>,
    pub gateways: Vec<Next>,
    /// the storage servers' content, read without any cache
    pub oracle: Next,
    pub config: CacheConfig,
    pub exports: Vec<tempfile::TempDir>,
    /// each gateway's CMCache counters (each gateway has its own registry)
    pub cm_metrics: Vec<cmcache::metrics::Metrics>,
    server_cfg: watch::Sender<CacheConfig>,
    gateway_cfg: watch::Sender<Option<Arc<CacheConfig>>>,
}

pub struct Spec {
    pub kind: NodeKind,
    pub nodes: usize,
    pub servers: usize,
    pub gateways: usize,
    pub block_size: u32,
    pub stripe_unit: u64,
    pub placement: Placement,
    pub threaded: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            kind: NodeKind::Memcached,
            nodes: 2,
            servers: 2,
            gateways: 2,
            block_size: 2048,
            stripe_unit: 64 * 1024,
            placement: Placement::Consistent,
            threaded: false,
        }
    }
}

impl Pipeline {
    pub fn start(spec: Spec) -> Pipeline {
        let nodes: Vec<BankNode> = (0..spec.nodes).map(|_| BankNode::start(spec.kind)).collect();
        let config = CacheConfig {
            epoch: 1,
            volume: "coherence".into(),
            nodes: nodes.iter().map(|n| n.addr()).collect(),
            fenced: Vec::new(),
            block_size: spec.block_size,
            placement: spec.placement,
            // generous: this machine is small and shared; a slow answer is a miss anyway
            timeout_ms: 200,
            lease_ms: 1000,
        };
        let (server_cfg, srx) = watch::channel(config.clone());
        let (gateway_cfg, grx) = watch::channel(Some(Arc::new(config.clone())));
        let exports: Vec<tempfile::TempDir> = (0..spec.servers).map(|_| tempfile::tempdir().unwrap()).collect();
        let posix: Vec<Next> = exports
            .iter()
            .map(|d| storage_server::graph::posix(d.path(), 256).expect("posix export") as Next)
            .collect();
        let servers: Vec<Next> = posix
            .iter()
            .map(|p| {
                Arc::new(SmCache::new(
                    p.clone(),
                    srx.clone(),
                    Arc::default(),
                    SmOptions {
                        threaded: spec.threaded,
                        deadline: Duration::from_secs(8),
                        bank: bank_options(),
                    },
                    &prometheus::Registry::new(),
                )) as Next
            })
            .collect();
        let (gateways, cm_metrics) = (0..spec.gateways)
            .map(|_| {
                let stripe: Next = Arc::new(gateway::stripe::Stripe::new(servers.clone(), spec.stripe_unit).unwrap());
                let cm = CmCache::new(stripe, grx.clone(), bank_options(), &prometheus::Registry::new())
                    .with_stripe_unit(spec.stripe_unit);
                let m = cm.metrics().clone();
                (xlator::InGraph::node(cm), m)
            })
            .unzip();
        let oracle: Next = Arc::new(gateway::stripe::Stripe::new(posix, spec.stripe_unit).unwrap());
        Pipeline { nodes, gateways, oracle, config, exports, cm_metrics, server_cfg, gateway_cfg }
    }

    /// `imca_gateway_cache_total{op, result}` summed over the gateways.
    pub fn cache_count(&self, op: &str, result: &str) -> u64 {
        self.cm_metrics.iter().map(|m| m.cache.with_label_values(&[op, result]).get()).sum()
    }

    /// The storage servers switch to `c` (gateways keep theirs until their
    /// lease brings the change: see `set_gateway_config`).
    pub fn set_server_config(&mut self, c: CacheConfig) {
        self.server_cfg.send_replace(c);
    }

    pub fn set_gateway_config(&mut self, c: CacheConfig) {
        self.config = c.clone();
        self.gateway_cfg.send_replace(Some(Arc::new(c)));
    }

    /// Change the volume config everywhere (as a rollout would).
    pub fn set_config(&mut self, c: CacheConfig) {
        self.config = c.clone();
        self.server_cfg.send_replace(c.clone());
        self.gateway_cfg.send_replace(Some(Arc::new(c)));
    }
}
