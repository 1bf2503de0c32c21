//! The server translator graph, in its fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  protocol-server -> SMCache -> posix
//! ```
//!
//! protocol-server (codec and dispatch of the storage RPC) sits on top and
//! is started by `lib.rs`; this module builds what it calls: SMCache, which
//! keeps the cache bank coherent with every mutation (and passes through
//! while the volume config names no cache nodes), over posix, the leaf that
//! stores the export on disk.

use volume::Volume;
use std::path::Path;
use std::sync::Arc;
use xlator::Translator;

/// What the server graph's translators are built from: the volume config,
/// SMCache's options and the server's metrics registry.
pub struct GraphContext {
    /// the volume config (subscribe for changes: node pool, block size, epoch)
    pub volume: Arc<Volume>,
    /// SMCache's options (`imca storage --cache-deadline-ms`, `--threaded-cache-updates`,
    /// and the bank options from `--transport`)
    pub smcache: smcache::SmOptions,
    /// the server's registry, where a translator registers its metrics
    pub registry: prometheus::Registry,
}

/// SMCache over `below` (posix): it follows the volume config (no cache
/// nodes = it passes through).
pub async fn with_smcache(below: Arc<dyn Translator>, ctx: &GraphContext) -> anyhow::Result<Arc<dyn Translator>> {
    let sm = smcache::SmCache::new(
        below,
        ctx.volume.subscribe(),
        ctx.volume.fences.clone(),
        ctx.smcache.clone(),
        &ctx.registry,
    );
    Ok(Arc::new(sm))
}

/// The posix leaf over `export` (creating `.imca/` state on first use).
pub fn posix(export: &Path, fd_cache: usize) -> anyhow::Result<Arc<dyn Translator>> {
    let p: Arc<dyn Translator> = posix::posix(export, fd_cache)?;
    Ok(p)
}

/// Build the translators under protocol-server: SMCache over posix.
pub async fn build(
    posix: Arc<dyn Translator>,
    volume: Arc<Volume>,
    smcache: smcache::SmOptions,
    registry: &prometheus::Registry,
) -> anyhow::Result<Arc<dyn Translator>> {
    with_smcache(posix, &GraphContext { volume, smcache, registry: registry.clone() }).await
}
