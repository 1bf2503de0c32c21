//! The client graph, built in one fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  FUSE bridge → coherence → io-stats → CMCache → stripe → protocol-client × S
//!                    ▲─────────── upcalls, leaf first ───────────┘
//! ```
//!
//! coherence sits above io-stats so that io-stats counts what reached past
//! the memo (what it counted before the memo moved into the graph). A
//! storage server's callback enters at its leaf and [`Graph::upcall`]
//! hands it to every translator from there to the top (see `upcalls`).

use coherence::Coherence;
use io_stats::IoStats;
use protocol_client::ProtocolClient;
use std::sync::Arc;
use stripe::Stripe;
use xlator::{InGraph, Next, Upcall};

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
    /// whether the kernel caches at all (`--kernel-cache`)
    pub kernel_cache: coherence::Mode,
    /// lookups missed in one directory before it is listed ahead (`--stat-ahead`)
    pub stat_ahead: u64,
}

/// The built graph, with handles to the parts others need (admin API, tests).
pub struct Graph {
    /// the top, as a translator (the same object as `coherence`)
    pub top: Next,
    /// the top, with its API for the FUSE bridge
    pub coherence: Arc<Coherence>,
    pub stripe: Arc<Stripe>,
    /// one leaf per storage server, in stripe order
    pub leaves: Vec<Next>,
    /// the translators above the leaves, from the bottom (stripe) to the top
    above_leaves: Vec<Next>,
}

impl Graph {
    /// Translator names from top to bottom, for logs and the admin API.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.above_leaves.iter().rev().map(|x| x.name().to_string()).collect();
        names.push(format!("protocol-client x{}", self.leaves.len()));
        names
    }

    /// Hand `upcall` to server `upcall.server`'s leaf, then to every
    /// translator above it up to the top, each once the one below returned.
    pub async fn upcall(&self, upcall: &Upcall) {
        if let Some(leaf) = self.leaves.get(upcall.server) {
            leaf.upcall(upcall).await;
        }
        for x in &self.above_leaves {
            x.upcall(upcall).await;
        }
    }
}

/// Build the graph over `clients` (one per storage server, in stripe
/// order); its translators register their metrics in `registry` (the
/// gateway's).
pub fn build(clients: &[Arc<ProtocolClient>], cfg: &GraphConfig, registry: &prometheus::Registry) -> anyhow::Result<Graph> {
    let leaves: Vec<Next> = clients.iter().map(|c| c.clone() as Next).collect();
    let stripe = Arc::new(Stripe::new(leaves.clone(), cfg.stripe_unit)?);
    stripe.register_metrics(registry);
    let below_stripe: Next = stripe.clone();
    let cached = cmcache(below_stripe, cfg, registry);
    let stats: Next = Arc::new(IoStats::new(cached, registry));
    let coherence = Arc::new(Coherence::new(stats, cfg.kernel_cache, clients.to_vec()).stat_ahead(cfg.stat_ahead));
    coherence.register_metrics(registry)?;
    let top: Next = Arc::new(InGraph::new(coherence.clone()));
    // (single-child translators: the chain ends at stripe, which fans out)
    let mut above_leaves = Vec::new();
    let mut at = Some(&top);
    while let Some(x) = at {
        above_leaves.push(x.clone());
        at = x.next();
    }
    above_leaves.reverse();
    Ok(Graph { top, coherence, stripe, leaves, above_leaves })
}

/// CMCache over `below` when the volume has a cache config under lease.
fn cmcache(below: Next, cfg: &GraphConfig, registry: &prometheus::Registry) -> Next {
    match &cfg.volume_config {
        Some(rx) => xlator::InGraph::node(
            cmcache::CmCache::new(below, rx.clone(), cfg.bank.clone(), registry).with_stripe_unit(cfg.stripe_unit),
        ),
        None => below,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn coherence_is_on_top_and_hears_a_leafs_upcall() {
        let clients: Vec<Arc<ProtocolClient>> =
            (0..2).map(|_| Arc::new(ProtocolClient::lazy("127.0.0.1:9", protocol_client::ClientOptions::default()))).collect();
        let cfg = GraphConfig {
            stripe_unit: 128 << 10,
            cache_nodes: Vec::new(),
            volume_config: None,
            bank: cache_bank::BankOptions::default(),
            kernel_cache: coherence::Mode::On,
            stat_ahead: 4,
        };
        let graph = build(&clients, &cfg, &prometheus::Registry::new()).unwrap();
        assert_eq!(graph.names(), ["coherence", "io-stats", "stripe", "protocol-client x2"]);
        // a lease from each server, delivered from its leaf up to the top
        for server in 0..2 {
            let until = Some(Instant::now() + Duration::from_secs(60));
            graph.upcall(&Upcall { server, lease_until: until, ..Upcall::default() }).await;
        }
        assert!(graph.coherence.kernel().remaining() > Duration::from_secs(50), "the coherence translator renewed both leases");
    }
}
