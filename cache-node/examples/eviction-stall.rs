//! The longest `set` when every item of a full store was read lately (issue
//! 14), in-process: no sockets and no scheduler between the clock and the
//! store, so one store's eviction work shows as it is.
//!
//! `-m 64` (32 shards, as `-t 2`), filled with 100 B items up to the first
//! eviction, every item read 10 s (of server time) after its store, then
//! SETS [20000] sets of new keys from one thread, each timed. The node's LRU
//! maintainer thread runs as in a server (MAINTAINER=0: without it).
//!   cargo run --release -p cache-node --example eviction-stall

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_node::store::{Item, Store};
use cache_node::{Config, Node};

fn set(s: &Store, k: &str) {
    s.with(k.as_bytes(), |slot| {
        let (now, cas) = (slot.now, slot.next_cas());
        assert!(slot.put(Item::new(vec![b'v'; 100].into(), 0, 0, now, cas)));
    });
}

fn main() {
    let sets: usize = std::env::var("SETS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let node = Arc::new(Node::new(Config { memory_bytes: 64 << 20, threads: 2, ..Config::local() }));
    if std::env::var("MAINTAINER").as_deref() != Ok("0") {
        node.start_maintainer().unwrap();
    }
    let s = &node.store;
    let mut n = 0;
    while s.hot.evictions.load(Ordering::Relaxed) == 0 {
        set(s, &format!("fill:{n}"));
        n += 1;
    }
    s.clock.advance(10);
    let held = (0..n).filter(|i| s.read(format!("fill:{i}").as_bytes(), |slot| slot.get().is_some())).count();
    let mut lat: Vec<Duration> = Vec::with_capacity(sets);
    let t0 = Instant::now();
    for r in 0..sets {
        let t = Instant::now();
        set(s, &format!("new:{r}"));
        lat.push(t.elapsed());
    }
    let all = t0.elapsed();
    let first = lat[0];
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "items {held}, {sets} sets in {all:?}: first {first:?}, p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        q(0.5),
        q(0.99),
        q(0.999),
        lat[lat.len() - 1]
    );
    println!("{}", counters(s));
}

/// The LRU counters, where the build has them.
fn counters(s: &Store) -> String {
    format!(
        "evictions {}, evicted_active {}, moves_within_lru {}, direct_reclaims {}, sweeps {}",
        s.hot.evictions.load(Ordering::Relaxed),
        s.lru.evicted_active.load(Ordering::Relaxed),
        s.lru.moves_within_lru.load(Ordering::Relaxed),
        s.lru.direct_reclaims.load(Ordering::Relaxed),
        s.lru.juggles.load(Ordering::Relaxed)
    )
}
