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

use cache_node::store::{Item, Store};

fn put(s: &Store, k: &str) {
    s.with(k.as_bytes(), |slot| {
        let (now, cas) = (slot.now, slot.next_cas());
        assert!(slot.put(Item::new(vec![b'v'; 1000].into(), 0, 0, now, cas)));
    });
}

fn get(s: &Store, k: &str) -> bool {
    s.read(k.as_bytes(), |slot| slot.get().is_some())
}

/// How many 1000-byte items a store of `limit` bytes holds.
fn capacity(limit: usize) -> usize {
    let s = Store::new(limit, 64);
    let mut n = 0;
    while s.hot.evictions.load(std::sync::atomic::Ordering::Relaxed) == 0 {
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
