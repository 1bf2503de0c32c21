//! A multi-get's lookups, warmed before they run: every key's cache misses
//! of a batch are started together instead of one after another.
//!
//! A hit reads three places no earlier key brought into the cache: the
//! key's slot in its shard's table, the entry it points to (`table.rs`),
//! and the value's first cache line, where pinning it writes the refcount
//! (`out.rs`). Each address is known only once the one before has arrived,
//! and each shard lock is a full barrier, so looked up key by key a 64-key
//! `get` waited for ~190 misses in a row (the `lru` crate's lookup alone was
//! ~30 % of the server's CPU, docs/benchmarks/archive/cache-node-vs-memcached.md). Here a batch
//! of keys goes through three cheap passes first, each issuing the next
//! level's prefetches for all keys, so each pass waits about one miss for
//! the whole batch instead of one per key:
//!
//! 1. hash each key, prefetch its first slot — without the shard lock,
//!    through the shard's [`Hint`] (a stale hint after the table grew is a
//!    wasted prefetch; prefetching never faults);
//! 2. under the shard lock, read the slot(s) and prefetch the entry whose
//!    tag matches (without comparing keys: that would wait for the entry);
//! 3. under the lock, find the entry and prefetch its value's first line.
//!
//! Then the ordinary lookups run (`exec_get.rs`) and find it all cached.
//! The passes only read and prefetch: they change nothing, so what the
//! lookups see is what they would have seen without them. memcached gets
//! part of this from its item layout (key and value inline, two misses);
//! the passes get the rest by overlapping.
//!
//! A single key (one `get`, `set`, ...) has no other key to overlap with,
//! but its slot can still start loading before the shard lock is taken
//! ([`Store::warm_slot`]; the lock's line is often in the other worker's
//! cache, and the two misses then overlap), and the entry's two lines load
//! together (`Table::find`). Its value is *not* prefetched as soon as the
//! entry is found: measured in-process (`examples/single-key-path.rs`),
//! that made a 2 KiB get/set mix ~10 % slower, and over TCP the value's
//! miss only moved from pinning it to the lookup (issue 14).
//!
//! A run of pipelined single-key reads already in the input buffer (meta
//! `mg`, binary GET/GETQ/GETK/GETKQ: the other ways clients batch) is
//! warmed the same way, a batch of requests at a time ([`warm_run`],
//! called by `session.rs`): their keys are picked out of the raw bytes
//! (a wrong guess, e.g. a base64 key, is a wasted prefetch, nothing more).

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::Store;
use crate::cache_line::prefetch;
use crate::table::Table;

/// Keys warmed together: their lines (4 each) stay well within L1.
pub const BATCH: usize = 16;

/// Where a shard's table keeps its slots, readable without the shard's
/// lock. Written under the lock when the table grows ([`Hint::publish`]).
#[derive(Default)]
pub struct Hint {
    slots: AtomicPtr<u64>,
    mask: AtomicUsize,
}

impl Hint {
    /// Records where `t`'s slots are now (after an insert that may have grown it).
    pub fn publish(&self, t: &Table) {
        let (p, mask) = t.slots_at();
        if self.slots.load(Ordering::Relaxed).cast_const() != p {
            self.mask.store(mask, Ordering::Relaxed);
            self.slots.store(p.cast_mut(), Ordering::Relaxed);
        }
    }
}

impl Store {
    /// Starts loading the first slot of `hash` in shard `i`, without the
    /// shard's lock (through its [`Hint`]).
    #[inline(always)]
    pub(crate) fn warm_slot(&self, i: usize, hash: u32) {
        let h = &self.hints[i];
        let (p, mask) = (h.slots.load(Ordering::Relaxed), h.mask.load(Ordering::Relaxed));
        prefetch(p.wrapping_add(hash as usize & mask).cast_const().cast());
    }

    /// Warms what the lookups of `keys` (at most [`BATCH`]) will read; see
    /// the module doc. Changes nothing.
    pub(crate) fn prefetch(&self, keys: &[&[u8]]) {
        let mut at = [(0usize, 0u32); BATCH];
        let at = &mut at[..keys.len().min(BATCH)];
        for (a, k) in at.iter_mut().zip(keys) {
            *a = self.place(k);
            self.warm_slot(a.0, a.1);
        }
        for &(i, hash) in &*at {
            let g = self.lock(i);
            if let Some(p) = g.lru.tagged_entry(hash) {
                prefetch(p);
                prefetch(p.wrapping_add(64));
            }
        }
        for (&(i, hash), k) in at.iter().zip(keys) {
            let g = self.lock(i);
            if let Some(e) = g.lru.find(hash, k) {
                let v = std::sync::Arc::as_ptr(&g.lru.item(e).value).cast::<u8>();
                // the refcount, 16 bytes before the bytes, and the bytes' first line
                prefetch(v.wrapping_sub(16));
                prefetch(v);
            }
        }
    }
}

/// Warms the keys of the pipelined single-key reads at the front of
/// `input` (`binary`: GET-family requests, else meta `mg` lines), up to
/// [`BATCH`] of them. Returns how many requests it warmed: 0 when fewer
/// than two are there (one lookup has nothing to overlap with).
pub(crate) fn warm_run(store: &Store, input: &[u8], binary: bool) -> usize {
    let mut keys: [&[u8]; BATCH] = [&[]; BATCH];
    let (mut n, mut at) = (0, 0);
    while n < BATCH {
        let next = if binary { binary_get(&input[at..]) } else { meta_get(&input[at..]) };
        let Some((key, len)) = next else { break };
        (keys[n], n, at) = (key, n + 1, at + len);
    }
    if n < 2 {
        return 0;
    }
    store.prefetch(&keys[..n]);
    n
}

/// The key and length of a whole `mg <key> ...` line at the front of `b`.
fn meta_get(b: &[u8]) -> Option<(&[u8], usize)> {
    let line = b.strip_prefix(b"mg ")?;
    let end = line.iter().position(|&c| c == b'\n')?;
    let key = line[..end].split(|&c| c == b' ' || c == b'\r').next()?;
    Some((key, 3 + end + 1))
}

/// The key and length of a whole binary GET, GETQ, GETK or GETKQ request
/// at the front of `b`.
fn binary_get(b: &[u8]) -> Option<(&[u8], usize)> {
    use cache_proto::binary::{op, HEADER_LEN};
    if b.len() < HEADER_LEN || b[0] != cache_proto::BINARY_REQ_MAGIC || ![op::GET, op::GETQ, op::GETK, op::GETKQ].contains(&b[1]) {
        return None;
    }
    let key_len = usize::from(u16::from_be_bytes([b[2], b[3]]));
    let ext = usize::from(b[4]);
    let body = u32::from_be_bytes([b[8], b[9], b[10], b[11]]) as usize;
    let total = HEADER_LEN.checked_add(body)?;
    if b.len() < total || ext + key_len > body {
        return None;
    }
    Some((&b[HEADER_LEN + ext..HEADER_LEN + ext + key_len], total))
}

#[cfg(test)]
mod tests {
    use crate::store::{Item, Store};

    #[test]
    fn prefetch_changes_nothing_and_hints_follow_growth() {
        let s = Store::new(64 << 20, 4);
        let keys: Vec<Vec<u8>> = (0..2000).map(|i| format!("key{i}").into_bytes()).collect();
        for k in &keys {
            s.with(k, |slot| assert!(slot.put(Item::new(vec![b'v'; 600].into(), 0, 0, slot.now, 1))));
        }
        for (i, h) in s.hints.iter().enumerate() {
            let g = s.lock(i);
            assert_eq!(h.slots.load(super::Ordering::Relaxed).cast_const(), g.lru.slots_at().0);
            assert_eq!(h.mask.load(super::Ordering::Relaxed), g.lru.slots_at().1);
        }
        let order = |s: &Store| -> Vec<Vec<(Vec<u8>, u64)>> {
            (0..s.shards.len())
                .map(|i| {
                    let g = s.lock(i);
                    let mut v = Vec::new();
                    let mut at = g.lru.tail();
                    while let Some(e) = at {
                        v.push((g.lru.key(e).to_vec(), g.lru.item(e).tick));
                        at = g.lru.newer(e);
                    }
                    v
                })
                .collect()
        };
        let before = order(&s);
        let batch: Vec<&[u8]> = keys.iter().take(10).map(|k| &k[..]).chain([&b"missing"[..]]).collect();
        s.prefetch(&batch);
        assert_eq!(order(&s), before);
        // runs of pipelined reads: how many requests are warmed
        let mg = b"mg key1 v\r\nmg key2 v k\r\nmg key3\r\nget key4\r\n";
        assert_eq!(super::warm_run(&s, mg, false), 3);
        assert_eq!(super::warm_run(&s, b"mg key1 v\r\nmg key2", false), 0);
        let getkq = |k: &[u8]| cache_proto::binary::Request::encode(cache_proto::binary::op::GETKQ, &[], k, &[], 0, 0);
        let run = [getkq(b"key1"), getkq(b"key2"), getkq(b"key3"), getkq(b"key4")].concat();
        assert_eq!(super::warm_run(&s, &run, true), 4);
        assert_eq!(super::warm_run(&s, &run[..run.len() - 1], true), 3);
        let long: Vec<u8> = (0..40).flat_map(|i| format!("mg key{i} v\r\n").into_bytes()).collect();
        assert_eq!(super::warm_run(&s, &long, false), super::BATCH);
        assert_eq!(order(&s), before);
        assert!(keys.iter().take(10).all(|k| s.read(k, |slot| slot.peek().is_some_and(|it| !it.active))));
    }
}
