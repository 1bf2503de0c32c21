//! Memory accounting against the real thing: the same `-m`, the same items,
//! Debian's `memcached` and our node must hold about as many items before
//! evicting, report the same `bytes` for the same items and the same
//! `limit_maxbytes`, and put the items in the same slab class. (memcached
//! fills 1 MiB slab pages with chunks of its item's class; our node charges
//! each item its chunk: `slabs.rs`.)

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use common::memcached::Memcached;
use common::{read_until, TestNode};

fn stats(s: &mut TcpStream, arg: &str) -> HashMap<String, u64> {
    s.write_all(format!("stats {arg}\r\n").as_bytes()).unwrap();
    let r = read_until(s, b"END\r\n");
    String::from_utf8_lossy(&r)
        .lines()
        .filter_map(|l| {
            let mut w = l.split(' ').skip(1);
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

struct Fill {
    /// items stored when the first eviction was seen
    first_eviction_at: u64,
    /// `bytes` after the first 100 items
    bytes_at_100: u64,
    limit: u64,
    /// (class id, chunk size) of the items
    class: (String, u64),
    total_malloced: u64,
}

/// Stores `n` items of `size` bytes (noreply, pipelined) and watches `stats`.
fn fill(addr: SocketAddr, size: usize, n: usize) -> Fill {
    let mut s = TcpStream::connect(addr).unwrap();
    let value = vec![b'v'; size];
    let batch = ((4 << 20) / (size + 50) / 40).clamp(1, 100);
    let (mut first, mut bytes_at_100) = (None, 0);
    let mut i = 0;
    while i < n {
        let mut req = Vec::new();
        for j in i..(i + batch).min(n) {
            req.extend_from_slice(format!("set key:{j:08} 0 0 {size} noreply\r\n").as_bytes());
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
        }
        i = (i + batch).min(n);
        s.write_all(&req).unwrap();
        let st = stats(&mut s, "");
        if i >= 100 && bytes_at_100 == 0 {
            bytes_at_100 = st["bytes"] * 100 / st["curr_items"].max(1);
        }
        if first.is_none() && st["evictions"] > 0 {
            first = Some(i as u64 - st["evictions"]);
        }
    }
    let st = stats(&mut s, "");
    let slabs = stats(&mut s, "slabs");
    let class = slabs.iter().find(|(k, _)| k.ends_with(":chunk_size")).map(|(k, v)| (k.split(':').next().unwrap().to_string(), *v)).unwrap();
    Fill {
        first_eviction_at: first.unwrap_or(0),
        bytes_at_100,
        limit: st["limit_maxbytes"],
        class,
        total_malloced: slabs["total_malloced"],
    }
}

#[test]
fn evictions_start_at_about_memcacheds_item_count_with_the_same_m() {
    // value sizes in small, middle and large slab classes, each on fresh
    // servers; n a little past where memcached starts evicting (43688,
    // 3608, 752 and 24 items)
    for (size, n) in [(100, 45_000), (2000, 3_800), (10_000, 800), (300_000, 30)] {
        let mc = Memcached::with(&["-m", "8"]);
        let ours = TestNode::start(cache_node::Config { memory_bytes: 8 << 20, ..cache_node::Config::local() });
        let want = fill(mc.addr, size, n);
        let got = fill(ours.addr, size, n);
        let ctx = format!("value {size} B: memcached first evicted at {} items, ours at {}", want.first_eviction_at, got.first_eviction_at);
        assert!(want.first_eviction_at > 0 && got.first_eviction_at > 0, "{ctx}: both must evict");
        let (w, g) = (want.first_eviction_at as f64, got.first_eviction_at as f64);
        assert!((g - w).abs() <= w * 0.03 + 2.0, "{ctx}");
        assert_eq!(got.bytes_at_100, want.bytes_at_100, "{ctx}: bytes for the same items");
        assert_eq!(got.limit, want.limit, "{ctx}: limit_maxbytes");
        assert_eq!(got.class, want.class, "{ctx}: slab class and chunk size");
        assert_eq!(got.total_malloced, want.total_malloced, "{ctx}: total_malloced when full");
    }
}
