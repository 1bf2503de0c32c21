//! `unix:/path` nodes: the bank reaches a cache node on this host through
//! its UNIX socket (`imca cache-node -s`, and Debian's `memcached -s`), and
//! a path with no node behind it is a refused node (a miss; writers may
//! skip it: it holds nothing).

use bytes::Bytes;
use cache_bank::{Bank, BankOptions, CacheKey, Update};
use std::time::Duration;
use volume::Placement;

fn opts() -> BankOptions {
    BankOptions { timeout: Duration::from_millis(500), connect_timeout: Duration::from_millis(500), ..Default::default() }
}

fn key(i: usize) -> CacheKey {
    CacheKey { key: format!("unix:{i}:{}", "k".repeat(40)), stripe: Some(i as u64) }
}

#[tokio::test]
async fn a_bank_over_unix_sockets_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (pi, pm) = (dir.path().join("imca.sock"), dir.path().join("mc.sock"));
    let node = cache_node::start(cache_node::Config { threads: 1, unix_socket: Some(pi.clone()), ..cache_node::Config::local() })
        .await
        .unwrap();
    let mc = testkit_procs::MemcachedUnix::start(&pm, &["-a", "0777"]);
    let addrs = [format!("unix:{}", pi.display()), format!("unix:{}", pm.display())];
    let bank = Bank::new(&addrs, Placement::Modulo, opts());
    let keys: Vec<CacheKey> = (0..64).map(key).collect();
    let vals: Vec<Bytes> = (0..64).map(|i| Bytes::from(format!("\r\nEND\r\nvalue {i}\0"))).collect();
    let ups: Vec<Update> = keys.iter().zip(&vals).map(|(k, v)| Update::Set(k.clone(), v.clone())).collect();
    bank.update(&ups, Some(Duration::from_secs(10))).await.unwrap();
    let got = bank.get_many(&keys, false).await;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.as_ref().map(|h| h.value.clone()), Some(vals[i].clone()), "key {i}");
    }
    // both nodes hold some: the imca node counted its sets
    let on_imca = keys.iter().filter(|k| bank.node_for(k) == Some(0)).count();
    assert!(on_imca > 0 && on_imca < 64);
    assert_eq!(node.node.stats.get(cache_node::stats::C::CmdSet), on_imca as u64);

    // a path nobody listens on: a fast miss, and a writer skips it
    let gone = format!("unix:{}", dir.path().join("nobody.sock").display());
    let bank = Bank::new(&[gone], Placement::Modulo, opts());
    assert!(bank.get_many(&keys[..1], false).await[0].is_none());
    bank.update(&ups[..1], Some(Duration::from_secs(5))).await.unwrap();

    drop(mc);
    node.shutdown().await;
}
