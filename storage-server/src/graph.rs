//! The server translator graph, in its fixed order (like a GlusterFS volfile):
//!
//! ```text
//!  protocol-server -> locks -> gateway-opens -> upcall -> SMCache -> posix
//! ```
//!
//! Locks on top (a lock request goes no further); gateway-opens admits an
//! open before upcall records what a create makes as held; upcall above
//! SMCache, so the gateways are called back once the bank has changed.
//! protocol-server holds the handles that answer what is not a file
//! operation ([`protocol_server::Controls`]).

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

/// What the per-gateway translators keep (`imca storage --kernel-lease`, `--lock-grace`).
pub struct SessionOptions {
    /// the kernel-cache lease granted to gateways
    pub lease: std::time::Duration,
    /// the record of granted leases (a restart's grace); the lock marker sits beside it
    pub record: Option<std::path::PathBuf>,
    /// after a restart with locks held, how long gateways have to reclaim them
    pub lock_grace: std::time::Duration,
}

/// Build the graph over posix, and protocol-server on top of it.
pub async fn build(
    posix: Arc<dyn Translator>,
    volume: Arc<Volume>,
    smcache: smcache::SmOptions,
    sessions: SessionOptions,
    registry: &prometheus::Registry,
) -> anyhow::Result<protocol_server::ProtocolServer> {
    let below = with_smcache(posix, &GraphContext { volume: volume.clone(), smcache, registry: registry.clone() }).await?;
    let marker = sessions.record.as_ref().map(|r| r.with_file_name(locks::recovery::MARKER));
    let leases = Arc::new(upcall::Leases::with_record(sessions.lease, sessions.record, registry));
    let upcall: Arc<dyn Translator> = Arc::new(upcall::Upcall::new(below, leases.clone()));
    let opens = Arc::new(gateway_opens::GatewayOpens::new(upcall, leases.clone(), registry));
    let table = match marker {
        Some(m) => locks::LockTable::with_recovery(leases.lease(), m, sessions.lock_grace, registry),
        None => locks::LockTable::new(leases.lease(), registry),
    };
    let locks = Arc::new(locks::Locks::new(opens.clone(), Arc::new(table), leases.clone()));
    let controls = protocol_server::Controls { leases, locks: locks.clone(), opens, volume };
    Ok(protocol_server::ProtocolServer::new(locks, controls, registry))
}
