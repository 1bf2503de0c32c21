//! The table against a model (a map and a recency list): the same key →
//! item answers and the same LRU order after any sequence of inserts,
//! replacements, removals, promotions and evictions from the tail, with
//! hashes that collide on purpose (long probe runs, wrap-around, backward
//! shifts) as well as spread ones.

use super::*;
use proptest::prelude::*;

fn item(v: u32) -> Item {
    Item::new(vec![1u8].into(), v, 0, 0, 0)
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, u32),
    Remove(u8),
    Promote(u8),
    PopTail,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..40, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (0u8..40).prop_map(Op::Remove),
        1 => (0u8..40).prop_map(Op::Promote),
        1 => Just(Op::PopTail),
    ]
}

fn key(k: u8) -> Vec<u8> {
    // long keys too (boxed, key.rs), beside short inline ones
    let len = if k.is_multiple_of(5) { 40 } else { 1 + usize::from(k % 7) };
    let mut v = vec![b'a' + k % 26; len];
    v[0] = k;
    v
}

/// Checks every invariant against the model; `order` is tail first.
fn check(t: &Table, model: &[(u8, u32)], hash: &impl Fn(u8) -> u32) {
    assert_eq!(t.len(), model.len());
    assert!(2 * t.len() <= t.slots.len() && t.slots.len().is_power_of_two());
    assert_eq!(t.slots.iter().filter(|&&s| s != 0).count(), t.len());
    // LRU order, tail to head, by the links
    let mut walked = Vec::new();
    let mut at = t.tail();
    while let Some(e) = at {
        walked.push((t.key(e)[0], t.item(e).flags));
        at = t.newer(e);
    }
    assert_eq!(walked, model);
    for &(k, v) in model {
        let e = t.find(hash(k), &key(k)).expect("present key found");
        assert_eq!((&**t.key(e), t.item(e).flags, t.hash(e)), (&key(k)[..], v, hash(k)));
    }
    for k in 0..40u8 {
        if !model.iter().any(|m| m.0 == k) {
            assert_eq!(t.find(hash(k), &key(k)), None);
        }
    }
}

fn run(ops: &[Op], hash: impl Fn(u8) -> u32) {
    let mut t = Table::default();
    let mut model: Vec<(u8, u32)> = Vec::new(); // tail first
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                let old = t.insert(hash(k), &key(k), item(v)).map(|i| i.flags);
                let pos = model.iter().position(|m| m.0 == k);
                assert_eq!(old, pos.map(|p| model[p].1));
                if let Some(p) = pos {
                    model.remove(p);
                }
                model.push((k, v));
            }
            Op::Remove(k) => {
                let pos = model.iter().position(|m| m.0 == k);
                match t.find(hash(k), &key(k)) {
                    Some(e) => {
                        let (kk, it) = t.remove(e);
                        assert_eq!((&*kk, Some((k, it.flags))), (&key(k)[..], pos.map(|p| model.remove(p))));
                    }
                    None => assert_eq!(pos, None),
                }
            }
            Op::Promote(k) => {
                if let Some(e) = t.find(hash(k), &key(k)) {
                    t.promote(e);
                    let p = model.iter().position(|m| m.0 == k).unwrap();
                    let m = model.remove(p);
                    model.push(m);
                }
            }
            Op::PopTail => {
                if let Some(e) = t.tail() {
                    let (kk, it) = t.remove(e);
                    assert_eq!((kk[0], it.flags), model.remove(0));
                }
            }
        }
        check(&t, &model, &hash);
    }
    t.clear();
    check(&t, &[], &hash);
    t.insert(hash(1), &key(1), item(7));
    check(&t, &[(1, 7)], &hash);
}

proptest! {
    #[test]
    fn matches_a_map_and_a_list_with_spread_hashes(ops in prop::collection::vec(op(), 1..300)) {
        run(&ops, |k| u32::from(k).wrapping_mul(0x9e37_79b9));
    }

    #[test]
    fn matches_a_map_and_a_list_with_colliding_hashes(ops in prop::collection::vec(op(), 1..300)) {
        // three homes, the table's last three slots whatever its size, and
        // equal tags: probe runs wrap around the end, deletions shift across it
        run(&ops, |k| u32::MAX - u32::from(k % 3));
    }
}

#[test]
fn an_entry_is_two_cache_lines() {
    assert_eq!(std::mem::size_of::<Option<Entry>>(), 128);
    assert_eq!(std::mem::align_of::<Option<Entry>>(), 64);
}
