//! Evictions: what a store that pushed the charged total over the bound
//! (`pages.rs`) takes out, and what it costs that store.
//!
//! Victims: an eviction takes the oldest of a few shards' LRU tails (by a
//! store-wide tick; measured within a few hundred sets of the oldest tail
//! of all shards). A tail item read lately ([`read_lately`]) deserves a
//! second trip from the head, but moving the items read lately out of the
//! way is the LRU maintainer's work (`store/maintainer.rs`, a thread of its own,
//! like memcached's): it sweeps the next evictions' region ahead of them,
//! in the store's order. A store itself looks at a bounded number of tail
//! items: it moves up to [`TAIL_RESCUES`] read ones back to the head (the
//! reads that came after the maintainer's last sweep), then evicts what is
//! at the tail even if it was read (memcached's `evicted_active`). Until
//! 2026-11-27 a store did the whole sweep itself when it met a tail where
//! everything had been read: 265 ms for one `set` in a store of 349,504
//! items (issue 14, docs/benchmarks/archive/cache-node-vs-memcached.md).

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::{live, Shard, Store};
use crate::item::{ntotal, read_lately, Item};

/// How many other shards' LRU tails an eviction looks at.
const EVICTION_SAMPLE: usize = 4;

/// How many tail items read lately one store moves back to the head
/// before it evicts tails regardless: memcached's tail search
/// (`lru_pull_tail`) looks at 5 items too. The maintainer keeps the tails
/// clean; these are for the reads since its last sweep.
pub const TAIL_RESCUES: usize = 5;

/// What [`Store::evict_one`] did with a shard's tail.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tail {
    Evicted,
    Rescued,
    Empty,
}

impl Store {
    /// After a store of `key` into shard `i` (still locked: `g`), evicts
    /// until the charged total is back under `limit` or nothing is left.
    pub(super) fn evict_over(&self, mut g: MutexGuard<'_, Shard>, i: usize, key: &[u8], limit: usize) {
        // Approximate global LRU: compare the tail of this shard with the
        // tails of a few others (try_lock only, so no lock-order deadlock)
        // and evict the least recently used of them. Every tail looked at
        // is either evicted or one of at most TAIL_RESCUES moved back to
        // the head: what a store pays is bounded by what it must free.
        let n = self.shards.len();
        let mut rescues = 0;
        while self.hot.used.load(Ordering::Relaxed) > limit {
            // a rescued item gets a fresh tick: the next round picks another tail
            let rescue = rescues < self.rescues;
            // Not the item this call stored: once every other item in its
            // shard was rescued (fresh ticks), it would look oldest.
            let own = g.lru.tail().filter(|&e| **g.lru.key(e) != *key).map(|e| g.lru.item(e).tick);
            let mut best: Option<(u64, MutexGuard<'_, Shard>)> = None;
            for _ in 0..EVICTION_SAMPLE.min(n - 1) {
                let j = self.cursor.fetch_add(1, Ordering::Relaxed) % n;
                if j == i {
                    continue;
                }
                let Ok(og) = self.shards[j].try_lock() else { continue };
                let Some(t) = og.lru.tail().map(|e| og.lru.item(e).tick) else { continue };
                if best.as_ref().is_none_or(|(bt, _)| t < *bt) {
                    best = Some((t, og));
                }
            }
            let tail = match (own, best) {
                (Some(o), Some((t, mut og))) if t < o => self.evict_one(&mut og, rescue),
                (Some(_), _) => self.evict_one(&mut g, rescue),
                (None, Some((_, mut og))) => self.evict_one(&mut og, rescue),
                (None, None) => break,
            };
            if tail == Tail::Rescued {
                rescues += 1;
            }
        }
        drop(g);
        // Still over: the newcomer is (nearly) alone in its shard; take from
        // the others, one lock at a time, until under the limit or nothing is left.
        while self.hot.used.load(Ordering::Relaxed) > limit {
            let mut progress = false;
            for j in (1..n).map(|d| (i + d) % n) {
                if self.hot.used.load(Ordering::Relaxed) <= limit {
                    break;
                }
                let mut g = self.lock(j);
                // An item read lately is rescued here too (within the same
                // budget), or a hot key would go whenever the sample above
                // found only empty shards.
                match self.evict_one(&mut g, rescues < self.rescues) {
                    Tail::Empty => continue,
                    Tail::Rescued => rescues += 1,
                    Tail::Evicted => {}
                }
                progress = true;
            }
            if !progress {
                break;
            }
        }
    }

    /// Evicts the shard's LRU tail, or (with `rescue`) moves it back to the
    /// head if it was read lately. A store calls this: it counts as one
    /// tail item a store looked at (memcached's `direct_reclaims`).
    fn evict_one(&self, g: &mut Shard, rescue: bool) -> Tail {
        let now = self.clock.now();
        let Some(e) = g.lru.tail() else { return Tail::Empty };
        self.lru.direct_reclaims.fetch_add(1, Ordering::Relaxed);
        let it = g.lru.item(e);
        let read = read_lately(it, now) && live(self, now, it);
        if read && rescue {
            // back to the head, inactive, with a fresh tick (it no longer
            // looks oldest across shards)
            let tick = self.hot.tick.fetch_add(1, Ordering::Relaxed);
            let it = g.lru.item_mut(e);
            (it.active, it.bumped, it.tick) = (false, now, tick);
            g.lru.promote(e);
            self.lru.moves_within_lru.fetch_add(1, Ordering::Relaxed);
            self.wake_maintainer();
            return Tail::Rescued;
        }
        let (k, it) = g.lru.remove(e);
        let id = self.account(ntotal(k.len(), &it), false);
        if it.exptime == 0 || it.exptime > now {
            let before = self.hot.evictions.fetch_add(1, Ordering::Relaxed);
            self.per_class[id - 1].evicted.fetch_add(1, Ordering::Relaxed);
            if read {
                // the maintainer has not kept up (or the item was read
                // since its sweep, more than TAIL_RESCUES times over)
                self.lru.evicted_active.fetch_add(1, Ordering::Relaxed);
                self.wake_maintainer();
            } else if before.is_multiple_of(super::maintainer::WAKE_EVERY) {
                self.wake_maintainer();
            }
            if self.log.on(crate::watch::EVICTIONS) {
                self.log_eviction(&k, &it, now);
            }
        }
        Tail::Evicted
    }

    /// memcached's eviction line for `watch evictions`.
    fn log_eviction(&self, key: &[u8], it: &Item, now: u32) {
        use std::fmt::Write;
        self.log.emit(crate::watch::EVICTIONS, |l| {
            l.push_str("type=eviction key=");
            crate::watch::uriencode(l, key);
            let ttl = if it.exptime > 0 { i64::from(it.exptime) - i64::from(now) } else { -1 };
            let _ = writeln!(
                l,
                " fetch={} ttl={ttl} la={} clsid={} size={}",
                if it.fetched { "yes" } else { "no" },
                now.wrapping_sub(it.atime) as i32,
                self.classes.id(ntotal(key.len(), it)),
                it.value.len()
            );
        });
    }
}
