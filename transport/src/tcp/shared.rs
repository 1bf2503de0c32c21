//! What every task of one TCP server shares: its options, the service, the
//! memory pool, the connection slots and the list of established
//! connections. The accept loop (`server.rs`) takes slots and sweeps the
//! list; each connection (`conn.rs`) lists itself and draws on the pool.

use super::activity::Activity;
use super::budget::Pool;
use super::server_options::ServerOptions;
use super::stats::{Close, ServerStats};
use crate::RpcService;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a newcomer waits for a slot when all are taken: for the one of
/// the connection it evicted, or for one to become evictable or free.
const SLOT_WAIT: Duration = Duration::from_secs(2);

/// What every task of one server shares.
pub(super) struct Shared {
    pub opts: ServerOptions,
    pub svc: Arc<dyn RpcService>,
    pub pool: Arc<Pool>,
    slots: Arc<Semaphore>,
    pub conns: Mutex<HashMap<u64, Arc<Activity>>>,
    next_conn: AtomicU64,
}

impl Shared {
    pub fn new(svc: Arc<dyn RpcService>, opts: ServerOptions) -> Arc<Shared> {
        Arc::new(Shared {
            pool: Pool::new(opts.memory, opts.stats.clone()),
            slots: Arc::new(Semaphore::new(opts.max_connections.max(1))),
            conns: Mutex::default(),
            next_conn: AtomicU64::new(0),
            svc,
            opts,
        })
    }

    pub fn stats(&self) -> &ServerStats {
        &self.opts.stats
    }

    /// List an established connection (for the sweeper and eviction) until
    /// the guard drops.
    pub fn register(self: &Arc<Self>, act: Arc<Activity>) -> Registered {
        let id = self.next_conn.fetch_add(1, Relaxed);
        self.conns.lock().unwrap().insert(id, act);
        self.stats().connections.fetch_add(1, Relaxed);
        Registered(self.clone(), id)
    }

    /// A connection slot: a free one, or the one of the longest-quiet idle
    /// connection, which is closed for it (trying again while connections
    /// age into evictability), or one that frees up meanwhile. `None`
    /// after [`SLOT_WAIT`]: every slot is busy.
    pub async fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        let deadline = Instant::now() + SLOT_WAIT;
        loop {
            if let Ok(p) = self.slots.clone().try_acquire_owned() {
                return Some(p);
            }
            self.evict_one();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let wait = left.min(self.opts.evict_after / 2).max(Duration::from_millis(10));
            if let Ok(p) = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
                return Some(p.expect("slots are never closed"));
            }
        }
    }

    fn evict_one(&self) -> Option<()> {
        // (one victim per newcomer and round: `close` is first-wins, and a
        // victim already closing is not picked again)
        let now = Instant::now();
        let conns = self.conns.lock().unwrap();
        let quiet = |a: &Arc<Activity>| a.quiet(now);
        let victim = conns
            .values()
            .filter(|a| a.closing().is_none() && a.is_idle() && quiet(a) >= self.opts.evict_after)
            .max_by_key(|a| quiet(a))?;
        victim.close(Close::Evicted).then_some(())
    }
}

pub(super) struct Registered(Arc<Shared>, u64);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.conns.lock().unwrap().remove(&self.1);
        self.0.stats().connections.fetch_sub(1, Relaxed);
    }
}

