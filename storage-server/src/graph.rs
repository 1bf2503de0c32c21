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
    // IMCA_SMCACHE_THREADED=1 selects the dissertation's "threaded" mode.
    let opts = server_translator::SmOptions {
        threaded: std::env::var("IMCA_SMCACHE_THREADED").is_ok_and(|v| v == "1"),
        ..Default::default()
    };
    Ok(Arc::new(server_translator::SmCache::new(below, ctx.volume.subscribe(), opts)))
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
