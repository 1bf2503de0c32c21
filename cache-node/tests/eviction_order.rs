//! Which items the store evicts under memory pressure (issue 14).
//!
//! memcached evicts items nobody reads any more and keeps the ones being
//! read: an item read while it sits in the cold part of its LRU is moved to
//! the warm part, and evictions take the cold tail. Our store gets the same
//! from a second chance at the tail (an item read lately goes back to the
//! head once). `memcaslap` against a store a previous load had filled and
//! read found two ways that went wrong, one test each: a budget of 16
//! rescues per store ran out in a tail where every item had been read, and
//! rescued items read long ago came back looking as recent as new ones.
//!
//! Those second chances are now the LRU maintainer's work (`store/maintainer.rs`,
//! a thread in the node); a store looks at a few tail items at most. These
//! tests run the maintainer's sweep themselves after every store, as a
//! thread that keeps up would ([`put`]); the last one has no maintainer and
//! counts what one store looks at.

use std::sync::atomic::Ordering;

use cache_node::store::{Item, Store, TAIL_RESCUES};

/// A set of a 1000-byte value, then the maintainer's sweeps until they
/// find nothing more to move (what its thread does when a store wakes it).
fn put(s: &Store, k: &str) {
    set(s, k, 1000);
    while s.maintain().moved > 0 {}
}

/// A set without the maintainer.
fn set(s: &Store, k: &str, len: usize) {
    s.with(k.as_bytes(), |slot| {
        let (now, cas) = (slot.now, slot.next_cas());
        assert!(slot.put(Item::new(vec![b'v'; len].into(), 0, 0, now, cas)));
    });
}

fn get(s: &Store, k: &str) -> bool {
    s.read(k.as_bytes(), |slot| slot.get().is_some())
}

/// How many 1000-byte items a store of `limit` bytes holds.
fn capacity(limit: usize) -> usize {
    let s = Store::new(limit, 64);
    let mut n = 0;
    while s.hot.evictions.load(Ordering::Relaxed) == 0 {
        put(&s, &format!("probe{n}"));
        n += 1;
    }
    s.items()
}

#[test]
fn a_tail_of_read_items_does_not_cost_the_ones_being_read() {
    let limit = 4 << 20;
    let cap = capacity(limit);
    assert!(cap > 2000, "{cap}");
    let s = Store::new(limit, 64);
    // A previous load: half the store, each item read once (active).
    let old = cap / 2;
    for i in 0..old {
        put(&s, &format!("old{i}"));
        assert!(get(&s, &format!("old{i}")));
    }
    // The new load: a stream of sets, each round reading back the most
    // recent `recent` new keys (what memcaslap's window does).
    let (new, recent) = (cap * 3 / 4, cap / 8);
    for r in 0..new {
        put(&s, &format!("new{r}"));
        for k in r.saturating_sub(recent - 1)..=r {
            assert!(get(&s, &format!("new{k}")), "round {r}: new{k} (one of the {recent} most recent) is gone");
        }
    }
    // The store filled after cap - old new keys; every later set evicted
    // one item, and all of them were old ones: every new key is still
    // there, the old keys that are left are the ones never evicted.
    let missing_new = (0..new).filter(|r| !get(&s, &format!("new{r}"))).count();
    let old_left = (0..old).filter(|i| get(&s, &format!("old{i}"))).count();
    assert_eq!(missing_new, 0, "new keys evicted while {old_left} old keys remain");
    assert_eq!(old_left, cap - new, "capacity {cap}");
}

#[test]
fn a_read_long_ago_does_not_outrank_a_recent_set() {
    let limit = 4 << 20;
    let cap = capacity(limit);
    let s = Store::new(limit, 64);
    // A previous load, read once, then 30 s of quiet.
    let old = cap / 2;
    for i in 0..old {
        put(&s, &format!("old{i}"));
        assert!(get(&s, &format!("old{i}")));
    }
    s.clock.advance(30);
    // The new load sets more than fits before it reads anything back.
    let new = cap - old + cap / 4;
    for r in 0..new {
        put(&s, &format!("new{r}"));
    }
    // By last access the old keys are the oldest: they go first (a rescue
    // would have put them behind every new key, which then went instead).
    let missing_new: Vec<_> = (0..new).filter(|r| !get(&s, &format!("new{r}"))).collect();
    let old_left = (0..old).filter(|i| get(&s, &format!("old{i}"))).count();
    assert!(missing_new.is_empty(), "{} new keys evicted (first new{}) while {old_left} old keys remain", missing_new.len(), missing_new[0]);
    assert_eq!(old_left, cap - new);
}

/// What one store does for eviction is bounded, however many items were
/// read lately: it looks at [`TAIL_RESCUES`] read tails at most, then
/// evicts. (A store used to move every read item of the store back to the
/// head before it evicted one: 265 ms for 349,504 items.) After the
/// maintainer's sweep the tail is clean and a store looks at one item.
#[test]
fn one_store_looks_at_a_few_tail_items_whatever_was_read() {
    let s = Store::new(4 << 20, 64);
    // fill with small items (the first eviction marks the limit), then
    // read every one of them
    let mut n = 0;
    while s.hot.evictions.load(Ordering::Relaxed) == 0 {
        set(&s, &format!("k{n}"), 100);
        n += 1;
    }
    // Reads 10 s after the stores: "read lately" for the next 10 s however
    // slowly this runs (a read in the second of its store is lately only
    // within that second).
    let read_all = || {
        s.clock.advance(10);
        (0..n).filter(|i| get(&s, &format!("k{i}"))).count()
    };
    let items = read_all();
    assert_eq!(items, s.items());
    assert!(items > 20_000, "{items}");
    let looked = |f: &dyn Fn()| {
        let (d, e) = (s.lru.direct_reclaims.load(Ordering::Relaxed), s.hot.evictions.load(Ordering::Relaxed));
        f();
        (s.lru.direct_reclaims.load(Ordering::Relaxed) - d, s.hot.evictions.load(Ordering::Relaxed) - e)
    };
    // Without the maintainer: a few rescues, then the read tail is evicted.
    let active_before = s.lru.evicted_active.load(Ordering::Relaxed);
    let (tails, evicted) = looked(&|| set(&s, "one more", 100));
    assert_eq!(evicted, 1);
    assert!(tails <= TAIL_RESCUES as u64 + evicted && tails <= 8, "one set looked at {tails} tail items of {items}");
    assert_eq!(s.lru.evicted_active.load(Ordering::Relaxed) - active_before, 1);
    // The maintainer's sweeps move the read items out of the next
    // evictions' way; the next store finds an unread tail at once.
    read_all();
    let mut sweeps = 0;
    while s.maintain().moved > 0 {
        sweeps += 1;
    }
    assert!(sweeps > 0);
    let active_before = s.lru.evicted_active.load(Ordering::Relaxed);
    for r in 0..100 {
        let (tails, evicted) = looked(&|| set(&s, &format!("new{r}"), 100));
        assert_eq!((tails, evicted), (1, 1), "store {r}");
    }
    assert_eq!(s.lru.evicted_active.load(Ordering::Relaxed), active_before);
}
