//! One shard's item table: an open-addressing hash index over an arena of
//! entries that also form the shard's LRU list. Replaces the `lru` crate
//! (issue 14, docs/benchmarks/archive/cache-node-vs-memcached.md).
//!
//! ```text
//!  slots: [u64; 2^k]  hash tag (32 bits) | entry index + 1   (0 = empty)
//!           │ linear probing from `hash & mask`, backward-shift deletion
//!           v
//!  entries: [Entry]   key (inline when short) + item + LRU links (indices)
//!                     head = most recently used ... tail = next to evict
//! ```
//!
//! Why our own: a hit in `lru::LruCache` (hashbrown control bytes → bucket
//! → boxed entry) was three dependent cache misses, ~30 % of the server's
//! CPU in a 64-key multi-get. Here a hit is two (the slot, whose 32-bit tag
//! rules out other keys without touching their entries, then the entry),
//! and both addresses can be computed ahead of the lookup: a multi-get
//! prefetches every key's slot, then every key's entry, before it looks any
//! of them up (`store/prefetch.rs`), so the misses of a batch overlap instead of
//! queueing one after another.
//!
//! The table knows nothing of expiry, bytes or ticks (`store.rs` does); it
//! keeps the key → entry map and the recency order, like the map it
//! replaces. The caller hashes: one 64-bit hash per key picks the shard
//! (high bits) and the slot (low 32 bits).

use crate::key::Key;
use crate::item::Item;

/// "No entry" in the LRU links.
const NIL: u32 = u32::MAX;

/// The fewest slots a table has (never zero: no special case for empty).
const MIN_SLOTS: usize = 16;

/// One item with its key and its place in the LRU list. Two cache lines,
/// aligned, so that a prefetch of its two lines brings all of it.
#[repr(align(64))]
struct Entry {
    key: Key,
    item: Item,
    /// the low 32 bits of the key's hash (finds its slot when removed)
    hash: u32,
    /// the neighbour towards the head (more recently used)
    newer: u32,
    /// the neighbour towards the tail
    older: u32,
}

pub struct Table {
    /// power-of-two many; load at most 1/2
    slots: Vec<u64>,
    /// `None`: free, its index in `free`
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for Table {
    fn default() -> Table {
        Table { slots: vec![0; MIN_SLOTS], entries: Vec::new(), free: Vec::new(), head: NIL, tail: NIL, len: 0 }
    }
}

fn slot(hash: u32, e: u32) -> u64 {
    (u64::from(hash) << 32) | (u64::from(e) + 1)
}

impl Table {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    fn entry(&self, e: u32) -> &Entry {
        self.entries[e as usize].as_ref().expect("live entry")
    }

    fn entry_mut(&mut self, e: u32) -> &mut Entry {
        self.entries[e as usize].as_mut().expect("live entry")
    }

    /// The entries whose slots carry `hash`'s tag, in probe order from its
    /// home: the candidates for a key of that hash (a 32-bit tag seldom
    /// matches another key's). Reads slots only.
    #[inline]
    fn tagged(&self, hash: u32) -> impl Iterator<Item = u32> + '_ {
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        std::iter::from_fn(move || loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            i = (i + 1) & mask;
            if (s >> 32) as u32 == hash {
                return Some(s as u32 - 1);
            }
        })
    }

    /// The entry of `key` (whose hash is `hash`), if present.
    #[inline]
    pub fn find(&self, hash: u32, key: &[u8]) -> Option<u32> {
        self.tagged(hash).find(|&e| {
            // The key is on the entry's first line, what a hit reads next
            // (expiry, flags, recency) on its second: ask for both at once
            // rather than one miss after the other.
            crate::cache_line::prefetch(self.line(e, 1));
            *self.entry(e).key == *key
        })
    }

    /// The address of cache line `n` (0 or 1) of entry `e`'s slot in the arena.
    fn line(&self, e: u32, n: usize) -> *const u8 {
        (&self.entries[e as usize] as *const Option<Entry>).cast::<u8>().wrapping_add(64 * n)
    }

    pub fn key(&self, e: u32) -> &Key {
        &self.entry(e).key
    }

    pub fn hash(&self, e: u32) -> u32 {
        self.entry(e).hash
    }

    pub fn item(&self, e: u32) -> &Item {
        &self.entry(e).item
    }

    pub fn item_mut(&mut self, e: u32) -> &mut Item {
        &mut self.entry_mut(e).item
    }

    /// The least recently used entry (the next to evict).
    pub fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// The entry used just more recently than `e`.
    pub fn newer(&self, e: u32) -> Option<u32> {
        let n = self.entry(e).newer;
        (n != NIL).then_some(n)
    }

    /// Inserts `key` as the most recently used entry, or replaces its item
    /// and moves it to the head; returns the item replaced.
    pub fn insert(&mut self, hash: u32, key: &[u8], item: Item) -> Option<Item> {
        if let Some(e) = self.find(hash, key) {
            let old = std::mem::replace(&mut self.entry_mut(e).item, item);
            self.promote(e);
            return Some(old);
        }
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let entry = Entry { key: key.into(), item, hash, newer: NIL, older: NIL };
        let e = match self.free.pop() {
            Some(e) => {
                self.entries[e as usize] = Some(entry);
                e
            }
            None => {
                self.entries.push(Some(entry));
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 items per shard")
            }
        };
        self.place(slot(hash, e));
        self.push_head(e);
        self.len += 1;
        None
    }

    /// Puts a slot at the first free place from its home.
    fn place(&mut self, s: u64) {
        let mask = self.slots.len() - 1;
        let mut i = (s >> 32) as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
    }

    fn grow(&mut self) {
        let n = 2 * self.slots.len();
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        for s in old.into_iter().filter(|&s| s != 0) {
            self.place(s);
        }
    }

    /// Removes entry `e`; returns its key and item.
    pub fn remove(&mut self, e: u32) -> (Key, Item) {
        self.unlink(e);
        let mask = self.slots.len() - 1;
        let want = slot(self.entry(e).hash, e);
        let mut hole = self.entry(e).hash as usize & mask;
        while self.slots[hole] != want {
            hole = (hole + 1) & mask;
        }
        // Backward-shift deletion: move later slots of the probe run into
        // the hole when their home is not between the hole and them, so
        // that every slot stays reachable from its home without gaps.
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let s = self.slots[i];
            if s == 0 {
                break;
            }
            let home = (s >> 32) as usize & mask;
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = i;
            }
        }
        self.slots[hole] = 0;
        let entry = self.entries[e as usize].take().expect("live entry");
        self.free.push(e);
        self.len -= 1;
        (entry.key, entry.item)
    }

    /// Moves `e` to the head (most recently used).
    pub fn promote(&mut self, e: u32) {
        if self.head != e {
            self.unlink(e);
            self.push_head(e);
        }
    }

    fn push_head(&mut self, e: u32) {
        let head = self.head;
        let en = self.entry_mut(e);
        (en.newer, en.older) = (NIL, head);
        if head == NIL {
            self.tail = e;
        } else {
            self.entry_mut(head).newer = e;
        }
        self.head = e;
    }

    fn unlink(&mut self, e: u32) {
        let Entry { newer, older, .. } = *self.entry(e);
        if newer == NIL {
            self.head = older;
        } else {
            self.entry_mut(newer).older = older;
        }
        if older == NIL {
            self.tail = newer;
        } else {
            self.entry_mut(older).newer = newer;
        }
    }

    /// Every entry's key and item, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Item)> {
        self.entries.iter().flatten().map(|en| (&en.key, &en.item))
    }

    /// Empties the table (the slots keep their size).
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.entries.clear();
        self.free.clear();
        (self.head, self.tail, self.len) = (NIL, NIL, 0);
    }

    /// Where `hash`'s probe starts: what a prefetch before the lock loads.
    /// Valid until the table grows (a stale one is a wasted prefetch).
    pub fn slots_at(&self) -> (*const u64, usize) {
        (self.slots.as_ptr(), self.slots.len() - 1)
    }

    /// The first cache line (of two) of the entry whose slot carries
    /// `hash`'s tag, first from its home: reads slots only, not entries
    /// (the key is not compared), so it waits for no entry to arrive.
    pub fn tagged_entry(&self, hash: u32) -> Option<*const u8> {
        self.tagged(hash).next().map(|e| self.line(e, 0))
    }
}

#[cfg(test)]
mod tests;
