//! The server translator graph, in its fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  protocol-server -> [slot: SMCache] -> posix
//! ```

use volume::Volume;
use std::path::Path;
use std::sync::Arc;
use xlator::Translator;

/// Everything a server translator may need when it is inserted in the slot.
pub struct SlotContext {
    /// the volume config (subscribe for changes: node pool, block size, epoch)
    pub volume: Arc<Volume>,
    /// SMCache's options (`imca storage --cache-deadline-ms`, `--threaded-cache-updates`,
    /// and the bank options from `--transport`)
    pub smcache: smcache::SmOptions,
    /// the server's registry, where a translator registers its metrics
    pub registry: prometheus::Registry,
}

/// THE SLOT: the translators between protocol-server and posix: SMCache,
/// which follows the volume config (no cache nodes = it passes through).
pub async fn smcaches(below: Arc<dyn Translator>, ctx: &SlotContext) -> anyhow::Result<Arc<dyn Translator>> {
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

/// Build the translators under protocol-server: slot over posix.
pub async fn build(
    posix: Arc<dyn Translator>,
    volume: Arc<Volume>,
    smcache: smcache::SmOptions,
    registry: &prometheus::Registry,
) -> anyhow::Result<Arc<dyn Translator>> {
    smcaches(posix, &SlotContext { volume, smcache, registry: registry.clone() }).await
}
