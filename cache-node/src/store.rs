//! The item store: a byte-bounded LRU, sharded so that connections on
//! different threads rarely contend.
//!
//! Each shard is an item table with its LRU list (`table.rs`) behind its
//! own mutex. Global atomics
//! count what `-m` bounds (plus the pages memcached keeps past it:
//! `store/pages.rs`): each item is charged the size of the memcached
//! slab chunk it would land in (`slabs.rs`), so the store holds about as
//! many items as memcached with the same `-m`; `stats bytes` is the sum of
//! memcached's `ITEM_ntotal` (key + value + [`ITEM_OVERHEAD`]), per slab
//! class too (`stats slabs`, `stats items`). When an insert pushes the
//! charged total over the limit, the inserting shard evicts from
//! its own LRU tail first (hash-spread keys make each shard's tail about as
//! old as the global tail), then from the other shards, one lock at a time.
//! Expired and flushed items are dropped lazily when touched, or when they
//! reach a tail.
//!
//! Hits move an item to the LRU head at most once per [`UPDATE_INTERVAL`]
//! (memcached's `ITEM_UPDATE_INTERVAL`); a hit in between only marks it
//! active, and eviction gives an active item at the tail a second chance
//! (memcached's `ITEM_ACTIVE` rescue). A hit is then one hash lookup and no
//! list surgery, and recently read items still survive eviction.
//!
//! Victims are chosen in `store/evict.rs`: the oldest of a few shards'
//! tails, with a bounded second chance for items read lately.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::clock::{Clock, UPDATE_INTERVAL};
use crate::item::ntotal;
use crate::slabs::{Classes, CHARGE_SHIFT};
use crate::table::Table;

mod evict;
pub mod maintainer;
mod pages;
pub(crate) mod prefetch;

pub use crate::item::{item_ntotal, Dead, Item, Value, ITEM_OVERHEAD};
pub use evict::TAIL_RESCUES;
use maintainer::Counters;
use prefetch::Hint;

#[derive(Default)]
pub struct Shard {
    pub(crate) lru: Table,
}

/// One slab class's counts (`stats slabs`, `stats items`).
#[derive(Default)]
pub struct ClassCount {
    pub items: AtomicUsize,
    /// sum of `ITEM_ntotal` (memcached's `mem_requested`)
    pub requested: AtomicUsize,
    /// chunks in use (an item above the largest chunk takes several)
    pub chunks: AtomicUsize,
    pub evicted: AtomicU64,
    /// has held an item: memcached's class has its first page (`pages.rs`)
    seen: AtomicBool,
}

/// What happened in a shard during one access, for byte accounting.
pub struct Slot<'s> {
    shard: &'s mut Shard,
    store: &'s Store,
    key: &'s [u8],
    /// the key's hash in the shard's table
    hash: u32,
    /// the shard's index, for its prefetch hint
    index: usize,
    pub now: u32,
    /// set when a lookup dropped a dead item (memcached's `get_expired`,
    /// `get_flushed` and `watch` statuses)
    pub dead: Option<Dead>,
}

/// Not expired and not flushed at server time `now`.
pub(crate) fn live(store: &Store, now: u32, it: &Item) -> bool {
    if it.exptime != 0 && it.exptime <= now {
        return false;
    }
    let oldest = store.oldest_live.load(Ordering::Relaxed);
    !(oldest != 0 && oldest <= now && it.time <= oldest)
}

impl Slot<'_> {

    /// The live item, bumped to most-recently-used; expired/flushed items are removed.
    pub fn get(&mut self) -> Option<&mut Item> {
        self.lookup(true)
    }

    /// Like `get` without the LRU bump (meta `u` flag).
    pub fn peek(&mut self) -> Option<&mut Item> {
        self.lookup(false)
    }

    fn lookup(&mut self, bump: bool) -> Option<&mut Item> {
        // One hash lookup on a hit; the list is touched at most once per
        // UPDATE_INTERVAL.
        let e = self.shard.lru.find(self.hash, self.key)?;
        let it = self.shard.lru.item_mut(e);
        if !live(self.store, self.now, it) {
            let expired = it.exptime != 0 && it.exptime <= self.now;
            self.dead = Some(if expired { Dead::Expired } else { Dead::Flushed });
            self.remove();
            return None;
        }
        if bump {
            if self.now.wrapping_sub(it.bumped) >= UPDATE_INTERVAL {
                it.bumped = self.now;
                it.active = false;
                // Reads only look at the tick (writes advance it): no shared
                // cache line is written on a hit.
                it.tick = self.store.hot.tick.load(Ordering::Relaxed);
                self.shard.lru.promote(e);
                return Some(self.shard.lru.item_mut(e));
            }
            it.active = true;
            it.atime = self.now;
        }
        Some(self.shard.lru.item_mut(e))
    }

    fn find(&self) -> Option<u32> {
        self.shard.lru.find(self.hash, self.key)
    }

    /// Inserts or replaces the item (most recently used). `false` (nothing
    /// changed) when the store evicts nothing (`-M`) and the item does not fit.
    #[must_use]
    pub fn put(&mut self, mut item: Item) -> bool {
        item.tick = self.store.hot.tick.fetch_add(1, Ordering::Relaxed);
        (item.bumped, item.active) = (self.now, false);
        let add = ntotal(self.key.len(), &item);
        if self.store.no_evict {
            let charged = |n| self.store.classes.charge(n).1;
            let old = self.find().map_or(0, |e| charged(ntotal(self.key.len(), self.shard.lru.item(e))));
            let add = charged(add);
            self.store.first_page(self.store.classes.id(ntotal(self.key.len(), &item)), add);
            if self.store.hot.used.load(Ordering::Relaxed) + add - old.min(add) > self.store.bound_fixed() {
                return false;
            }
        }
        let old = self.shard.lru.insert(self.hash, self.key, item);
        self.store.hints[self.index].publish(&self.shard.lru);
        self.store.account(add, true);
        if let Some(o) = old {
            self.store.account(ntotal(self.key.len(), &o), false);
        }
        self.store.hot.total_items.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Changes the value of the current item in place (incr/decr), keeping accounting right.
    pub fn set_value(&mut self, value: Value) {
        if let Some(e) = self.find() {
            let it = self.shard.lru.item_mut(e);
            let (old, new) = (it.value.len(), value.len());
            it.value = value;
            self.store.account(item_ntotal(self.key.len(), new), true);
            self.store.account(item_ntotal(self.key.len(), old), false);
        }
    }

    pub fn remove(&mut self) -> bool {
        match self.find() {
            Some(e) => {
                let (_, old) = self.shard.lru.remove(e);
                self.store.account(ntotal(self.key.len(), &old), false);
                true
            }
            None => false,
        }
    }

    pub fn next_cas(&self) -> u64 {
        self.store.next_cas()
    }
}

/// A seeded multiply-rotate hasher (FxHash-like): several times faster than
/// SipHash on short keys. memcached itself hashes with unseeded murmur3.
#[derive(Clone, Copy)]
pub struct FastHash(u64);

pub struct FastHasher(u64);

impl BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(self.0)
    }
}

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(K).rotate_left(26);
        }
        let mut last = [0u8; 8];
        last[..c.remainder().len()].copy_from_slice(c.remainder());
        h = (h ^ u64::from_le_bytes(last) ^ bytes.len() as u64).wrapping_mul(K).rotate_left(26);
        self.0 = h;
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K).rotate_left(26);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        // final avalanche so that both high bits (shard) and low bits (table) mix
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

/// The store-wide counters stores and evictions write.
#[derive(Default)]
#[repr(align(128))]
pub struct Hot {
    /// charged against `limit`: slab chunks (`Classes::charge`, in 1/1024 bytes)
    used: AtomicUsize,
    /// memcached's `bytes`: sum of `ITEM_ntotal`
    requested: AtomicUsize,
    items: AtomicUsize,
    cas: AtomicU64,
    pub evictions: AtomicU64,
    pub total_items: AtomicU64,
    pub(crate) tick: AtomicU64,
}

pub struct Store {
    pub(crate) shards: Box<[Mutex<Shard>]>,
    /// per shard, where its table's slots are, read without its lock
    pub(crate) hints: Box<[Hint]>,
    hasher: FastHash,
    limit: AtomicUsize,
    /// what stores write, on cache lines of its own: a get on one thread
    /// reads the fields around it without a miss after every set on another
    pub hot: Hot,
    pub classes: Classes,
    /// per slab class, index = class id - 1
    pub per_class: Box<[ClassCount]>,
    /// memcached's `settings.oldest_live` (server time; 0 = none)
    oldest_live: AtomicU32,
    pub clock: Clock,
    cursor: AtomicUsize,
    /// memcached's `-M`: a store that does not fit is refused, nothing is evicted
    no_evict: bool,
    /// tail items read lately one store moves back to the head:
    /// [`TAIL_RESCUES`], or 0 without the LRU maintainer ([`Self::without_maintainer`])
    rescues: usize,
    /// `watch` (evictions are logged here, where they happen)
    pub log: crate::watch::Log,
    /// pages memcached would hold past the limit (`pages.rs`)
    pages: pages::Pages,
    /// what stores and the LRU maintainer did at the tails (`stats`)
    pub lru: Counters,
    /// the LRU maintainer's thread, woken by stores that evict
    pub(crate) maintainer: std::sync::OnceLock<std::thread::Thread>,
}

impl Store {
    /// `limit` in bytes; `shards` is rounded up to a power of two.
    pub fn new(limit: usize, shards: usize) -> Store {
        let n = shards.max(1).next_power_of_two();
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish() | 1;
        let shards: Box<[Mutex<Shard>]> = (0..n).map(|_| Mutex::new(Shard::default())).collect();
        let hints: Box<[Hint]> = (0..n).map(|_| Hint::default()).collect();
        for (h, s) in hints.iter().zip(&shards) {
            h.publish(&s.lock().unwrap().lru);
        }
        Store {
            shards,
            hints,
            hasher: FastHash(seed),
            limit: AtomicUsize::new(limit),
            hot: Hot::default(),
            per_class: (0..Classes::default().count()).map(|_| ClassCount::default()).collect(),
            classes: Classes::default(),
            oldest_live: AtomicU32::new(0),
            clock: Clock::default(),
            cursor: AtomicUsize::new(0),
            no_evict: false,
            rescues: TAIL_RESCUES,
            pages: Default::default(),
            log: Default::default(),
            lru: Counters::default(),
            maintainer: Default::default(),
        }
    }

    /// `-M`: refuse what does not fit instead of evicting ([`Slot::put`]).
    pub fn without_evictions(mut self) -> Store {
        self.no_evict = true;
        self
    }

    /// `-o no_lru_maintainer`: no maintainer thread, and stores evict the
    /// tail whether it was read or not. memcached without its maintainer is
    /// a plain LRU too (`lru_segmented no`: no warm LRU, no tail rescues; a
    /// hit moves an item to the head once per [`UPDATE_INTERVAL`]), so the
    /// keys read since their store go in store order.
    pub fn without_maintainer(mut self) -> Store {
        self.rescues = 0;
        self
    }

    /// Whether an LRU maintainer keeps this store's tails (`stats settings`
    /// `lru_maintainer_thread`).
    pub fn maintained(&self) -> bool {
        self.rescues > 0
    }

    /// memcached's `-n`/`-f` slab classes instead of the default ones.
    pub fn with_classes(mut self, classes: Classes) -> Store {
        self.per_class = (0..classes.count()).map(|_| ClassCount::default()).collect();
        self.classes = classes;
        self
    }

    pub fn next_cas(&self) -> u64 {
        self.hot.cas.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts an item of `ntotal` bytes in (`add`) or out of the store and
    /// its slab class; returns its class id.
    fn account(&self, ntotal: usize, add: bool) -> usize {
        let (id, charged) = self.classes.charge(ntotal);
        let chunks = self.classes.chunks(ntotal).1;
        let c = &self.per_class[id - 1];
        if add {
            self.first_page(id, charged);
            self.hot.used.fetch_add(charged, Ordering::Relaxed);
            self.hot.requested.fetch_add(ntotal, Ordering::Relaxed);
            self.hot.items.fetch_add(1, Ordering::Relaxed);
            c.items.fetch_add(1, Ordering::Relaxed);
            c.requested.fetch_add(ntotal, Ordering::Relaxed);
            c.chunks.fetch_add(chunks, Ordering::Relaxed);
        } else {
            self.hot.used.fetch_sub(charged, Ordering::Relaxed);
            self.hot.requested.fetch_sub(ntotal, Ordering::Relaxed);
            self.hot.items.fetch_sub(1, Ordering::Relaxed);
            c.items.fetch_sub(1, Ordering::Relaxed);
            c.requested.fetch_sub(ntotal, Ordering::Relaxed);
            c.chunks.fetch_sub(chunks, Ordering::Relaxed);
        }
        id
    }

    /// The key's (shard, hash in the shard's table): one hash, its high
    /// half picks the shard, its low half the slot.
    pub(crate) fn place(&self, key: &[u8]) -> (usize, u32) {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        let h = h.finish();
        ((h >> 32) as usize & (self.shards.len() - 1), h as u32)
    }

    pub(crate) fn lock(&self, i: usize) -> MutexGuard<'_, Shard> {
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with the key's slot under its shard lock for a read that
    /// stores nothing (a get): no look at the byte counts stores write.
    pub fn read<R>(&self, key: &[u8], f: impl FnOnce(&mut Slot<'_>) -> R) -> R {
        let now = self.clock.now();
        let (index, hash) = self.place(key);
        self.warm_slot(index, hash);
        let mut g = self.lock(index);
        f(&mut Slot { shard: &mut g, store: self, key, hash, index, now, dead: None })
    }

    /// Runs `f` with the key's slot under its shard lock, then evicts until
    /// the store is back under its byte limit.
    pub fn with<R>(&self, key: &[u8], f: impl FnOnce(&mut Slot<'_>) -> R) -> R {
        let (i, hash) = self.place(key);
        self.warm_slot(i, hash);
        let now = self.clock.now();
        let mut g = self.lock(i);
        let r = {
            let mut slot = Slot { shard: &mut g, store: self, key, hash, index: i, now, dead: None };
            f(&mut slot)
        };
        let limit = self.bound_fixed();
        if self.hot.used.load(Ordering::Relaxed) <= limit {
            return r;
        }
        self.evict_over(g, i, key, limit);
        r
    }

    /// flush_all: immediate (drops everything) or at server time `at`.
    pub fn flush(&self, at: Option<u32>) {
        match at {
            None => {
                for i in 0..self.shards.len() {
                    let mut g = self.lock(i);
                    for (k, it) in g.lru.iter() {
                        self.account(ntotal(k.len(), it), false);
                    }
                    g.lru.clear();
                }
                self.oldest_live.store(0, Ordering::Relaxed);
            }
            Some(t) => self.oldest_live.store(t.saturating_sub(1).max(1), Ordering::Relaxed),
        }
    }

    /// memcached's `bytes`: the sum of the items' `ITEM_ntotal`.
    pub fn bytes(&self) -> usize {
        self.hot.requested.load(Ordering::Relaxed)
    }

    /// What `-m` is charged: the items' slab chunks (bytes).
    pub fn charged(&self) -> usize {
        self.hot.used.load(Ordering::Relaxed) >> CHARGE_SHIFT
    }

    /// The limit in the units of `used`.
    pub(crate) fn limit_fixed(&self) -> usize {
        self.limit.load(Ordering::Relaxed).saturating_mul(1 << CHARGE_SHIFT)
    }

    /// What `-m` is charged, in the units of the limit ([`Self::limit_fixed`]).
    pub(crate) fn used_fixed(&self) -> usize {
        self.hot.used.load(Ordering::Relaxed)
    }

    /// `-M`: stores are refused instead of evicting.
    pub(crate) fn evicts_nothing(&self) -> bool {
        self.no_evict
    }

    pub fn items(&self) -> usize {
        self.hot.items.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &Store, k: &str, v: usize) {
        s.with(k.as_bytes(), |slot| {
            let now = slot.now;
            let cas = slot.next_cas();
            assert!(slot.put(Item::new(vec![b'x'; v].into(), 0, 0, now, cas)));
        });
    }

    #[test]
    fn byte_bound_and_lru_order() {
        // ten items of ntotal 1000 + 59 + 2 fit in ten chunks of 1184 (885 a page)
        let s = Store::new(10 * (1 << 20) / 885 + 1, 1);
        for i in 0..10 {
            put(&s, &format!("k{i}"), 1000);
        }
        assert_eq!(s.items(), 10);
        s.with(b"k0", |slot| assert!(slot.get().is_some())); // k0 is now most recent
        put(&s, "k10", 1000);
        assert_eq!(s.items(), 10);
        assert!(s.charged() <= s.limit());
        // memcached's ITEM_ntotal: nine 2-byte keys and "k10"
        assert_eq!(s.bytes(), 9 * (2 + 1000 + ITEM_OVERHEAD) + (3 + 1000 + ITEM_OVERHEAD));
        assert_eq!(s.hot.evictions.load(Ordering::Relaxed), 1);
        s.with(b"k0", |slot| assert!(slot.get().is_some()));
        s.with(b"k1", |slot| assert!(slot.get().is_none()));
    }

    #[test]
    fn big_item_evicts_from_other_shards() {
        let s = Store::new(4000, 64);
        // the big items' slab class has its page already (`pages.rs`)
        put(&s, "big0", 3500);
        for i in 0..30 {
            put(&s, &format!("k{i}"), 50);
        }
        put(&s, "big", 3500);
        assert!(s.charged() <= s.limit(), "{} > {}", s.charged(), s.limit());
        s.with(b"big", |slot| assert!(slot.get().is_some()));
    }
}
