//! The bank client against real Debian memcached nodes.

mod memcached;

use bytes::Bytes;
use cache_bank::{Bank, BankOptions, CacheKey, Update};
use memcached::Memcached;
use std::time::{Duration, Instant};
use volume::Placement;

fn opts() -> BankOptions {
    // generous: the test machine is small and busy
    BankOptions { timeout: Duration::from_millis(500), connect_timeout: Duration::from_millis(500), ..Default::default() }
}

fn key(i: usize) -> CacheKey {
    CacheKey { key: format!("test:{i}:{}", "k".repeat(60)), stripe: Some(i as u64) }
}

fn batches_sent(bank: &Bank) -> u64 {
    bank.options().metrics.latency.with_label_values(&["get"]).get_sample_count()
}

#[tokio::test]
async fn many_keys_over_two_nodes_cost_one_batch_per_node() {
    let (a, b) = (Memcached::start(), Memcached::start());
    for p in [Placement::Crc32, Placement::Modulo, Placement::Consistent] {
        let bank = Bank::new(&[a.addr_string(), b.addr_string()], p, opts());
        // binary values, including CRLF and the text protocol's own words
        let vals: Vec<Bytes> =
            (0..600).map(|i| Bytes::from(format!("\r\nEND\r\nVALUE x 0 1\r\n{i}\0\u{ff}").into_bytes())).collect();
        let ups: Vec<Update> = (0..600).map(|i| Update::Set(key(i), vals[i].clone())).collect();
        bank.update(&ups, Some(Duration::from_secs(10))).await.unwrap();
        let keys: Vec<CacheKey> = (0..700).map(key).collect();
        let before = batches_sent(&bank);
        let got = bank.get_many(&keys, false).await;
        assert_eq!(batches_sent(&bank) - before, 2, "{p:?}: one pipelined batch per node");
        for i in 0..600 {
            assert_eq!(got[i].as_ref().map(|h| h.value.clone()), Some(vals[i].clone()), "{p:?} key {i}");
        }
        assert!(got[600..].iter().all(|h| h.is_none()));
        // both nodes hold some keys
        let on_a = keys.iter().filter(|k| bank.node_for(k) == Some(0)).count();
        assert!(on_a > 100 && on_a < 600, "{p:?}: {on_a} of 700 on node 0");
        bank.flush_all().await.into_iter().for_each(|r| r.unwrap());
    }
}

#[tokio::test]
async fn a_claim_is_broken_by_an_invalidation() {
    let m = Memcached::start();
    let bank = Bank::new(&[m.addr_string()], Placement::Crc32, opts());
    let k = CacheKey::new("claim:test".into());
    let ph = bank.codec().placeholder().clone();
    let c = bank.claim_many(std::slice::from_ref(&k), &ph).await;
    let hit = c[0].clone().unwrap();
    assert!(bank.codec().is_placeholder(&hit.value));
    // a mutation invalidates between the claim and the populate
    bank.update(&[Update::Delete(k.clone())], Some(Duration::from_secs(5))).await.unwrap();
    bank.update(&[Update::Cas(k.clone(), Bytes::from_static(b"stale"), hit.cas.unwrap())], Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(bank.get_many(std::slice::from_ref(&k), false).await[0].is_none(), "the stale populate must not land");
    // an unbroken claim populates
    let hit = bank.claim_many(std::slice::from_ref(&k), &ph).await[0].clone().unwrap();
    let again = bank.claim_many(std::slice::from_ref(&k), &ph).await[0].clone().unwrap();
    assert_eq!(hit, again, "a second claimant sees the first one's placeholder");
    bank.update(&[Update::Cas(k.clone(), Bytes::from_static(b"fresh"), hit.cas.unwrap())], None).await.unwrap();
    let got = bank.get_many(std::slice::from_ref(&k), false).await;
    assert_eq!(got[0].as_ref().unwrap().value, Bytes::from_static(b"fresh"));
}

#[tokio::test]
async fn a_dead_node_is_a_miss_and_is_used_again_when_back() {
    let live = Memcached::start();
    let mut dead = Memcached::start();
    let bank = Bank::new(&[live.addr_string(), dead.addr_string()], Placement::Modulo, opts());
    let ks = [key(0), key(1)];
    assert_ne!(bank.node_for(&ks[0]), bank.node_for(&ks[1]));
    let set: Vec<Update> = ks.iter().map(|k| Update::Set(k.clone(), Bytes::from_static(b"v"))).collect();
    bank.update(&set, Some(Duration::from_secs(5))).await.unwrap();
    let port = dead.kill();
    let t = Instant::now();
    let got = bank.get_many(&ks, false).await;
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(got.iter().filter(|h| h.is_some()).count(), 1, "the live node still answers");
    // a writer may skip a node whose address refuses connections: it holds nothing
    bank.update(&set, Some(Duration::from_secs(5))).await.unwrap();
    let _back = Memcached::on(port, &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        bank.update(&set, Some(Duration::from_secs(5))).await.unwrap();
        if bank.get_many(&ks, false).await.iter().all(|h| h.is_some()) {
            break;
        }
        assert!(Instant::now() < deadline, "the restarted node was never used again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_frozen_node_is_a_fast_miss_and_writers_wait_for_it_in_order() {
    let m = Memcached::start();
    let reader = Bank::new(&[m.addr_string()], Placement::Crc32, BankOptions {
        timeout: Duration::from_millis(50),
        connect_timeout: Duration::from_millis(200),
        ..Default::default()
    });
    let writer = Bank::new(&[m.addr_string()], Placement::Crc32, opts());
    let k = key(3);
    writer.update(&[Update::Set(k.clone(), Bytes::from_static(b"old"))], Some(Duration::from_secs(5))).await.unwrap();
    m.freeze();
    let t = Instant::now();
    assert!(reader.get_many(std::slice::from_ref(&k), false).await[0].is_none());
    assert!(t.elapsed() < Duration::from_secs(2), "a frozen node must be a fast miss");
    // the writer cannot confirm while the node is frozen...
    let w = writer.update(&[Update::Set(k.clone(), Bytes::from_static(b"new"))], Some(Duration::from_millis(300))).await;
    assert!(w.is_err(), "an unconfirmed update must not be reported as done");
    // ...and what it queued is applied, in order, once the node thaws
    let w2 = tokio::spawn({
        let k = k.clone();
        async move {
            writer.update(&[Update::Set(k, Bytes::from_static(b"newest"))], Some(Duration::from_secs(20))).await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    m.thaw();
    w2.await.unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(h) = &reader.get_many(std::slice::from_ref(&k), false).await[0] {
            assert_eq!(h.value, Bytes::from_static(b"newest"));
            break;
        }
        assert!(Instant::now() < deadline, "the thawed node was never read again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_refused_node_that_restarted_is_not_skipped_by_writers() {
    let port = Memcached::start().kill();
    let addr = format!("127.0.0.1:{port}");
    let writer = Bank::new(std::slice::from_ref(&addr), Placement::Crc32, opts());
    let k = key(9);
    // several refusals: the node's back-off grows
    for _ in 0..8 {
        writer.update(&[Update::Delete(k.clone())], Some(Duration::from_secs(5))).await.unwrap();
    }
    let _back = Memcached::on(port, &[]);
    let other = Bank::new(std::slice::from_ref(&addr), Placement::Crc32, opts());
    other.update(&[Update::Set(k.clone(), Bytes::from_static(b"filled after restart"))], Some(Duration::from_secs(5)))
        .await
        .unwrap();
    // the writer's next delete must reach the restarted node, not be skipped
    // on the strength of an old refusal
    writer.update(&[Update::Delete(k.clone())], Some(Duration::from_secs(5))).await.unwrap();
    assert!(other.get_many(std::slice::from_ref(&k), false).await[0].is_none(), "a delete was skipped");
}
