//! Whether a storage server is used: a server that missed a deadline is
//! marked down, and its calls fail with EIO at once until a background
//! probe gets an answer from it.
//!
//! ```text
//!  call ── down? ──yes──> EIO now (imca_gateway_storage_fast_failed_total)
//!    │ no
//!    └─> RPC ── no answer by the deadline ──> mark down ──> probe task:
//!                                                 GetVolumeConfig every PROBE_EVERY
//!                                                 (each bounded by the op timeout)
//!                                                 ── answered ──> mark up
//! ```
//!
//! Without this, every operation that touched a frozen (SIGSTOPped,
//! half-dead) server waited out its own timeout, and one in every few
//! reconnect attempts did so again. A refused connection (a killed server)
//! fails fast by itself and marks nothing: only silence does.

use crate::metrics::HealthMetrics;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use transport::RpcClient;
use wire::{decode_reply, Request};

/// How often a down server is probed.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

pub(crate) struct Health {
    down: AtomicBool,
    since: Mutex<Option<Instant>>,
    up_gauge: prometheus::IntGauge,
    fast_failed: prometheus::IntCounter,
}

impl Health {
    pub(crate) fn new(server: &str, metrics: &HealthMetrics) -> Health {
        let up_gauge = metrics.up.with_label_values(&[server]);
        up_gauge.set(1);
        Health { down: AtomicBool::new(false), since: Mutex::new(None), up_gauge, fast_failed: metrics.fast_failed.with_label_values(&[server]) }
    }

    pub(crate) fn is_down(&self) -> bool {
        self.down.load(SeqCst)
    }

    /// How long it has been down (`None`: it is up).
    pub(crate) fn down_for(&self) -> Option<Duration> {
        self.since.lock().unwrap_or_else(|p| p.into_inner()).map(|s| s.elapsed())
    }

    pub(crate) fn count_fast_fail(&self) {
        self.fast_failed.inc();
    }

    /// Mark down after a missed deadline; the first to do so starts the
    /// probe that will mark it up again.
    pub(crate) fn mark_down(self: &Arc<Self>, rpc: &Arc<dyn RpcClient>, probe_timeout: Duration, session: u64) {
        if self.down.swap(true, SeqCst) {
            return;
        }
        *self.since.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.up_gauge.set(0);
        tracing::warn!(server = %rpc.describe(), "storage server missed its deadline: marked down, its calls fail at once until it answers a probe");
        tokio::spawn(probe(self.clone(), rpc.clone(), probe_timeout, session));
    }

    fn mark_up(&self, server: &str) {
        let since = self.since.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.up_gauge.set(1);
        self.down.store(false, SeqCst);
        let after = since.map(|s| s.elapsed().as_secs_f64()).unwrap_or(0.0);
        tracing::info!(server, "storage server answers again after {after:.1} s: used again");
    }
}

/// Ask `rpc` for the volume config until it answers, then mark it up.
async fn probe(health: Arc<Health>, rpc: Arc<dyn RpcClient>, timeout: Duration, session: u64) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if Arc::strong_count(&health) == 1 {
            return; // the client is gone: nobody to tell
        }
        let msg = Request::GetVolumeConfig {}.encode_in_session(session);
        if let Ok(Ok(reply)) = tokio::time::timeout(timeout, rpc.call(msg, 0)).await {
            if decode_reply(&reply).is_ok_and(|r| r.result.is_ok()) {
                health.mark_up(&rpc.describe());
                return;
            }
        }
    }
}
