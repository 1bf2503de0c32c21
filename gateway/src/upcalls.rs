//! The storage servers' callbacks, as upcalls: one poll loop per server
//! keeps this gateway's lease there and turns each answer into an
//! [`Upcall`] that [`Graph::upcall`] hands up the graph from that server's
//! leaf; the next poll acknowledges it once every translator heard it
//! (the coherence translator has then dropped what it names from the
//! memo and the kernel).
//!
//! ```text
//!  poll loop i ── Poll{acked} ──> server i ── Callbacks{lease, seq, fresh, items} ──┐
//!      ▲                                                                            v
//!      └── acked = seq ◄── Graph::upcall: protocol-client i → stripe → CMCache → io-stats → coherence
//! ```

use crate::graph::Graph;
use protocol_client::ProtocolClient;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlator::{Invalidation, Upcall};

/// Keep the lease of server `i` and hand its callbacks up `graph` until `stop`.
pub async fn poll_loop(i: usize, server: Arc<ProtocolClient>, graph: Arc<Graph>, stop: impl std::future::Future<Output = ()>) {
    tokio::pin!(stop);
    let (mut acked, mut had_lease, mut backoff) = (0u64, false, Duration::from_millis(50));
    // when the poll that last renewed the lease was sent
    let mut renewed_at: Option<Instant> = None;
    loop {
        let sent = Instant::now();
        let r = tokio::select! {
            _ = &mut stop => return,
            r = server.poll(acked) => r,
        };
        match r {
            Ok(cb) => {
                backoff = Duration::from_millis(50);
                // A lease that ran out meanwhile (this gateway was frozen or
                // cut off) may have cost our owners their locks there.
                let lapsed = !cb.lease.is_zero() && renewed_at.is_some_and(|t: Instant| t.elapsed() >= cb.lease);
                let mut items = cb.items;
                if cb.fresh && had_lease {
                    // The server forgot us (restart): we may have missed some.
                    tracing::info!(server = %server.describe(), "kernel-cache session renewed from scratch; dropping the kernel's caches");
                    items = vec![Invalidation::All];
                }
                // A little short of the server's count, for clock-rate drift.
                let lease_until = (!cb.lease.is_zero()).then(|| sent + cb.lease - cb.lease / 32);
                let upcall = Upcall { server: i, session_lost: cb.fresh, lease_lapsed: lapsed, items, seq: cb.seq, lease_until };
                graph.upcall(&upcall).await;
                acked = cb.seq;
                if lease_until.is_some() {
                    renewed_at = Some(sent);
                    had_lease = true;
                }
            }
            Err(e) => {
                tracing::debug!(server = %server.describe(), "kernel-cache poll failed: {e}");
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
}
