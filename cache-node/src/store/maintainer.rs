//! The LRU maintainer: a thread that moves the items read lately out of
//! the way of the next evictions, so that a store evicts what it finds at
//! the tail after looking at one item or a few.
//!
//! An item read since its last move to the head ([`read_lately`]) gets a
//! second trip from the head instead of being evicted. Who pays for that
//! trip matters: when a store did it (before 2026-11-27), a store that met
//! a tail where everything had been read moved every item of the store
//! before it could evict one (265 ms for 349,504 items, issue 14). memcached
//! moves items between its hot, warm and cold LRUs in a background thread
//! (`lru_maintainer_thread`), and a store evicts from the cold tail after
//! looking at 5 items at most. Here the same split:
//!
//! - a store looks at [`TAIL_RESCUES`](crate::store::TAIL_RESCUES) read
//!   items at most before it evicts regardless (`store.rs`);
//! - this thread sweeps the next evictions' region: the items whose tick
//!   is within [`WINDOW`] of the oldest shard tail. It moves the ones read
//!   lately to their shard's head, and leaves the rest (the victims) in
//!   place. Then it sleeps until stores have evicted [`WAKE_EVERY`] items
//!   (a quarter of the window) or met a read item at a tail.
//!
//! One sweep moves its items **in the order they had**, across all shards,
//! with ticks newer than any store's so far: it does what one eviction
//! after another would have done with those items, in the same order.
//! (Shard after shard with fresh ticks, a sweep would put all of the first
//! shards' items behind the last shards' whatever their age; within one
//! window that is a small disorder, but a window may hold a whole small
//! store. Keeping the order costs one sort of the items moved.)
//!
//! The sweep works only near the limit (from 1/[`NEAR`] below it): before,
//! nothing is evicted and the order of the tails does not matter yet. A
//! sweep of a clean region looks at up to [`WINDOW`] items and moves none;
//! when every item was read lately, sweeps follow each other without sleep
//! until the region is clean, while stores evict read items (counted as
//! `evicted_active`, as memcached does when its maintainer falls behind).
//!
//! Counters in `stats` use memcached's names: `lru_maintainer_juggles`
//! (sweeps), `moves_within_lru` (items moved back to the head, by sweeps
//! and stores), `evicted_active`, `direct_reclaims` (tail items stores
//! looked at themselves).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::{live, Store};
use crate::item::read_lately;
use crate::key::Key;

/// How far past the oldest tail (in store ticks: one per store) a sweep
/// looks: the next evictions, about this many. Large enough that stores
/// rarely reach past it between two sweeps; small enough that a sweep of a
/// clean region costs a few hundred microseconds.
pub const WINDOW: u64 = 4096;

/// Stores wake the maintainer after this many evictions: a quarter of the
/// window, so that the region stays swept three quarters ahead.
pub const WAKE_EVERY: u64 = WINDOW / 4;

/// Sweeps start when the store is within 1/NEAR of its limit.
pub const NEAR: usize = 16;

/// How long the maintainer sleeps when no store woke it.
pub(crate) const IDLE: Duration = Duration::from_millis(100);

/// What stores and the maintainer did at the LRU tails.
#[derive(Default)]
#[repr(align(128))]
pub struct Counters {
    /// sweeps (memcached's `lru_maintainer_juggles`)
    pub juggles: AtomicU64,
    /// items moved back to the head because they were read lately
    pub moves_within_lru: AtomicU64,
    /// evicted although read lately: the maintainer had not reached them
    pub evicted_active: AtomicU64,
    /// tail items a store looked at itself (evicted or moved)
    pub direct_reclaims: AtomicU64,
    /// items sweeps looked at
    pub swept: AtomicU64,
    /// set by the first store that wants a sweep since the last one
    wake: AtomicBool,
}

/// What one sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// items looked at
    pub examined: usize,
    /// items moved back to the head
    pub moved: usize,
}

impl Store {
    /// One sweep of the next evictions' region (see the module doc). The
    /// maintainer thread calls it; tests call it to stand for that thread.
    pub fn maintain(&self) -> Sweep {
        self.lru.juggles.fetch_add(1, Ordering::Relaxed);
        // stores that evict from here on may wake us again
        self.lru.wake.store(false, Ordering::Relaxed);
        let limit = self.bound_fixed();
        if self.evicts_nothing() || self.used_fixed() < limit - limit / NEAR {
            return Sweep::default();
        }
        let n = self.shards.len();
        let tail_tick = |i| {
            let g = self.lock(i);
            g.lru.tail().map(|e| g.lru.item(e).tick)
        };
        let Some(oldest) = (0..n).filter_map(tail_tick).min() else {
            return Sweep::default();
        };
        let horizon = oldest.saturating_add(WINDOW);
        let now = self.clock.now();
        // The read items in the region, shard by shard (tails are ordered
        // by tick within a shard).
        let mut found: Vec<(u64, usize, u32, Key)> = Vec::new();
        let mut examined = 0;
        for i in 0..n {
            let g = self.lock(i);
            let mut at = g.lru.tail();
            while let Some(e) = at {
                let it = g.lru.item(e);
                if it.tick >= horizon {
                    break;
                }
                examined += 1;
                if read_lately(it, now) && live(self, now, it) {
                    found.push((it.tick, i, g.lru.hash(e), g.lru.key(e).clone()));
                }
                at = g.lru.newer(e);
            }
        }
        self.lru.swept.fetch_add(examined as u64, Ordering::Relaxed);
        if found.is_empty() {
            return Sweep { examined, moved: 0 };
        }
        // New ticks in the old order, newer than any store's so far.
        found.sort_unstable_by_key(|f| f.0);
        let base = self.hot.tick.fetch_add(found.len() as u64, Ordering::Relaxed);
        let mut moves: Vec<(usize, u64, u64, u32, Key)> =
            found.into_iter().enumerate().map(|(rank, (old, i, h, k))| (i, old, base + rank as u64, h, k)).collect();
        // per shard, oldest first: the newest ends at the head
        moves.sort_unstable_by_key(|m| (m.0, m.2));
        let mut moved = 0;
        for run in moves.chunk_by(|a, b| a.0 == b.0) {
            let mut g = self.lock(run[0].0);
            for (_, old, new, h, k) in run {
                // a store may have bumped, rescued or replaced it meanwhile
                let Some(e) = g.lru.find(*h, k) else { continue };
                let it = g.lru.item_mut(e);
                if it.tick != *old {
                    continue;
                }
                (it.active, it.bumped, it.tick) = (false, now, *new);
                g.lru.promote(e);
                moved += 1;
            }
        }
        self.lru.moves_within_lru.fetch_add(moved as u64, Ordering::Relaxed);
        Sweep { examined, moved }
    }

    /// A store asks for a sweep: wakes the maintainer thread, once until
    /// its next sweep starts.
    pub(crate) fn wake_maintainer(&self) {
        if !self.lru.wake.swap(true, Ordering::Relaxed) {
            if let Some(t) = self.maintainer.get() {
                t.unpark();
            }
        }
    }
}
