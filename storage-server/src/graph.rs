//! The server translator graph, in its fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  protocol-server -> [server-translator slot: SMCache] -> posix
//! ```

use crate::posix;
use crate::volume::Volume;
use std::path::Path;
use std::sync::Arc;
use xlator::Translator;

/// Everything a server translator may need when it is inserted in the slot.
pub struct SlotContext {
    /// the volume config (subscribe for changes: node pool, block size, epoch)
    pub volume: Arc<Volume>,
}

/// THE SLOT: the translators between protocol-server and posix. SMCache
/// (server-translator crate) is inserted here; today it passes `below`
/// through unchanged. `ctx.volume.subscribe()` / `.sender()` give the volume
/// config watch.
pub async fn server_translators(below: Arc<dyn Translator>, ctx: &SlotContext) -> anyhow::Result<Arc<dyn Translator>> {
    // SMCache follows the volume config (no cache nodes = it passes through).
    // IMCA_SMCACHE_THREADED=1 selects the dissertation's "threaded" mode;
    // IMCA_SMCACHE_DEADLINE_MS how long a mutation waits for a cache node
    // before asking for it to be fenced.
    let mut opts = server_translator::SmOptions {
        threaded: std::env::var("IMCA_SMCACHE_THREADED").is_ok_and(|v| v == "1"),
        ..Default::default()
    };
    if let Some(ms) = std::env::var("IMCA_SMCACHE_DEADLINE_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        opts.deadline = std::time::Duration::from_millis(ms.max(1));
    }
    let sm = server_translator::SmCache::new(below, ctx.volume.subscribe(), ctx.volume.fences.clone(), opts);
    Ok(Arc::new(sm))
}

/// The posix leaf over `export` (creating `.imca/` state on first use).
pub fn posix(export: &Path, fd_cache: usize) -> anyhow::Result<Arc<dyn Translator>> {
    let p: Arc<dyn Translator> = posix::posix(export, fd_cache)?;
    Ok(p)
}

/// Build the translators under protocol-server: slot over posix.
pub async fn build(posix: Arc<dyn Translator>, volume: Arc<Volume>) -> anyhow::Result<Arc<dyn Translator>> {
    server_translators(posix, &SlotContext { volume }).await
}
