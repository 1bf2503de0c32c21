//! The client graph, built in one fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  FUSE → io-stats → [slot: CMCache] → stripe → protocol-client × S
//! ```

use io_stats::IoStats;
use stripe::{Stripe, StripeError};
use std::sync::Arc;
use xlator::Next;

/// What the graph is built from.
#[derive(Clone, Debug)]
pub struct GraphConfig {
    pub stripe_unit: u64,
    /// cache-node addresses given on the command line (empty: no cache)
    pub cache_nodes: Vec<String>,
    /// the volume's cache config under the gateway's lease (volume::lease);
    /// None: no CMCache in the graph
    pub volume_config: Option<tokio::sync::watch::Receiver<cmcache::HeldConfig>>,
    /// options of every bank CMCache builds (`--transport`, bank metrics)
    pub bank: cache_bank::BankOptions,
}

/// The built graph, with handles to the parts others need (admin API, tests).
pub struct Graph {
    /// what the FUSE layer calls
    pub top: Next,
    pub stripe: Arc<Stripe>,
    /// one leaf per storage server, in stripe order
    pub leaves: Vec<Next>,
}

impl Graph {
    /// Translator names from top to bottom, for logs and the admin API.
    pub fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut at: Option<&Next> = Some(&self.top);
        while let Some(x) = at {
            names.push(x.name().to_string());
            at = x.next();
        }
        names.push(format!("protocol-client x{}", self.leaves.len()));
        names
    }
}

/// Build the graph; its translators register their metrics in `registry`
/// (the gateway's).
pub fn build(leaves: Vec<Next>, cfg: &GraphConfig, registry: &prometheus::Registry) -> Result<Graph, StripeError> {
    let stripe = Arc::new(Stripe::new(leaves.clone(), cfg.stripe_unit)?);
    stripe.register_metrics(registry);
    let below_stripe: Next = stripe.clone();
    let cached = cmcache(below_stripe, cfg, registry);
    let top: Next = Arc::new(IoStats::new(cached, registry));
    Ok(Graph { top, stripe, leaves })
}

// ─── CLIENT-TRANSLATOR SLOT ─────────────────────────────────────────────────
// CMCache (crate cmcache) goes here: wrap `below` and return the
// wrapper. Everything it needs is in `cfg` (cache nodes) and can be added to
// `GraphConfig`; the volume's live CacheConfig comes from the storage servers.
fn cmcache(below: Next, cfg: &GraphConfig, registry: &prometheus::Registry) -> Next {
    match &cfg.volume_config {
        Some(rx) => xlator::InGraph::node(
            cmcache::CmCache::new(below, rx.clone(), cfg.bank.clone(), registry).with_stripe_unit(cfg.stripe_unit),
        ),
        None => below,
    }
}
// ────────────────────────────────────────────────────────────────────────────
