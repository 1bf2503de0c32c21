//! The coherence promise, tested on the translator pipeline in one process
//! (two gateways' CMCache -> stripe over two storage servers' SMCache ->
//! posix, one real bank), against an oracle that reads the storage servers
//! with no cache at all. Runs with Debian's memcached and `imca cache-node`.

mod coherence_support;

use bytes::Bytes;
use coherence_support::bank::NodeKind;
use coherence_support::inproc::{Pipeline, Spec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use xlator::*;

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn same(a: &Attr, b: &Attr) -> bool {
    // atime moves on reads and `blocks` is allocation detail; everything a
    // program compares after a mutation must match exactly
    a.fid == b.fid
        && a.kind == b.kind
        && a.size == b.size
        && a.perm == b.perm
        && a.nlink == b.nlink
        && a.uid == b.uid
        && a.gid == b.gid
        && a.mtime == b.mtime
        && a.ctime == b.ctime
}

async fn lookup(g: &Next, name: &str) -> FsResult<Attr> {
    g.lookup(&Loc::root(), name).await
}

/// What gateway `g` shows for `name` must be what the storage servers hold.
async fn check(p: &Pipeline, g: usize, name: &str, rng: &mut StdRng, ctx: &str) {
    let gw = &p.gateways[g];
    let want = lookup(&p.oracle, name).await;
    let got = lookup(gw, name).await;
    match (&want, &got) {
        (Err(a), Err(b)) => assert_eq!(a, b, "{ctx}: lookup {name} errors differ"),
        (Ok(a), Ok(b)) => assert!(same(a, b), "{ctx}: gateway {g} stat of {name}\n got {b:?}\nwant {a:?}"),
        _ => panic!("{ctx}: gateway {g} lookup {name}: got {got:?}, storage says {want:?}"),
    }
    let Ok(a) = want else { return };
    let loc = Loc::new(name, Some(a.fid));
    let got = gw.getattr(&loc).await.unwrap();
    assert!(same(&a, &got), "{ctx}: gateway {g} getattr of {name}\n got {got:?}\nwant {a:?}");
    // the whole file, then a random range (often one that ends past EOF)
    let whole = a.size as u32 + 100;
    let want = p.oracle.read(&loc, 0, whole).await.unwrap();
    let got = gw.read(&loc, 0, whole).await.unwrap();
    if want != got {
        let first = want.iter().zip(got.iter()).position(|(a, b)| a != b);
        if let Some(i) = first {
            let disk = std::fs::read(p.exports[0].path().join(name)).unwrap();
            let disk1 = std::fs::read(p.exports[1].path().join(name)).unwrap();
            eprintln!("got {:?}\nwant {:?}\ndisk0 {:?}\ndisk1 {:?}", &got[i..i + 8], &want[i..i + 8], disk.get(i..i + 8), disk1.get(i..i + 8));
            let last = want.iter().zip(got.iter()).rposition(|(a, b)| a != b);
            eprintln!("last difference {last:?}");
        }
        panic!("{ctx}: gateway {g} read of {name} (size {}): {} bytes vs {} on storage, first difference at {first:?}", a.size, got.len(), want.len());
    }
    let off = rng.random_range(0..a.size + 4096);
    let len = rng.random_range(1..70_000);
    let want = p.oracle.read(&loc, off, len).await.unwrap();
    let got = gw.read(&loc, off, len).await.unwrap();
    if want != got {
        for (i, e) in p.exports.iter().enumerate() {
            eprintln!("server {i}: local size {:?}", std::fs::metadata(e.path().join(name)).map(|m| m.len()));
        }
        let first = want.iter().zip(got.iter()).position(|(a, b)| a != b);
        panic!(
            "{ctx}: gateway {g} read {name} [{off}, +{len}) of size {}: got {} bytes, want {}, first difference at {first:?}",
            a.size,
            got.len(),
            want.len()
        );
    }
}

fn random_bytes(rng: &mut StdRng, n: usize) -> Bytes {
    let mut v = vec![0u8; n];
    rng.fill(&mut v[..]);
    Bytes::from(v)
}

/// One random mutation through gateway `g`; returns the name it touched.
async fn mutate(p: &Pipeline, g: usize, rng: &mut StdRng) -> Vec<&'static str> {
    let gw = &p.gateways[g];
    let name = NAMES[rng.random_range(0..NAMES.len())];
    let existing = lookup(gw, name).await.ok();
    let loc = existing.as_ref().map(|a| Loc::new(name, Some(a.fid)));
    match (rng.random_range(0..10), loc) {
        (_, None) => {
            let new = NewFile {
                name: name.into(),
                fid: FileId::from_random(rng.random()),
                perm: 0o644,
                owner: Owner::default(),
                exclusive: false,
            };
            eprintln!("g{g} create {name}");
            gw.create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap();
        }
        (0..=3, Some(loc)) => {
            // writes across blocks, stripe units and servers, often extending the file
            let off = rng.random_range(0..300_000u64);
            let len = rng.random_range(1..20_000usize);
            eprintln!("g{g} write {name} [{off}, +{len})");
            let r = gw.write(&loc, off, random_bytes(rng, len)).await.unwrap();
            assert_eq!(r.written as usize, len);
        }
        (4, Some(loc)) => {
            let size = rng.random_range(0..300_000u64);
            eprintln!("g{g} truncate {name} {size}");
            gw.setattr(&loc, &SetAttr { size: Some(size), ..Default::default() }).await.unwrap();
        }
        (5, Some(loc)) => {
            let perm = [0o600, 0o644, 0o755, 0o400][rng.random_range(0..4)];
            gw.setattr(&loc, &SetAttr { perm: Some(perm), ..Default::default() }).await.unwrap();
        }
        (6, Some(loc)) => {
            let t = Timestamp { secs: rng.random_range(1_000_000..2_000_000_000), nsecs: rng.random_range(0..1_000_000_000) };
            gw.setattr(&loc, &SetAttr { mtime: Some(TimeSet::At(t)), ..Default::default() }).await.unwrap();
        }
        (7, Some(_)) => {
            eprintln!("g{g} unlink {name}");
            gw.unlink(&Loc::root(), name).await.unwrap();
        }
        (8, Some(_)) => {
            let to = NAMES[rng.random_range(0..NAMES.len())];
            if to != name {
                eprintln!("g{g} rename {name} {to}");
                gw.rename(&Loc::root(), name, &Loc::root(), to, RenameFlags::default()).await.unwrap();
                return vec![name, to];
            }
        }
        (_, Some(loc)) => {
            // append
            let a = gw.getattr(&loc).await.unwrap();
            let len = rng.random_range(1..3000usize);
            eprintln!("g{g} append {name} at {} +{len}", a.size);
            gw.write(&loc, a.size, random_bytes(rng, len)).await.unwrap();
        }
    }
    vec![name]
}

async fn random_ops(kind: NodeKind, seed: u64, ops: usize) {
    random_ops_with(Spec { kind, ..Default::default() }, seed, ops).await
}

async fn random_ops_with(spec: Spec, seed: u64, ops: usize) {
    let p = Pipeline::start(spec);
    let mut rng = StdRng::seed_from_u64(seed);
    let hits_before = p.cache_count("read", "hit");
    for i in 0..ops {
        let g = rng.random_range(0..2);
        let touched = mutate(&p, g, &mut rng).await;
        for name in touched {
            // through the other gateway, then the same one
            check(&p, 1 - g, name, &mut rng, &format!("seed {seed} op {i}")).await;
            check(&p, g, name, &mut rng, &format!("seed {seed} op {i}")).await;
        }
    }
    let hits = p.cache_count("read", "hit") - hits_before;
    assert!(hits > ops as u64 / 2, "the bank answered only {hits} reads: the cache is not being used");
    let stat_hits = p.cache_count("getattr", "hit");
    assert!(stat_hits > ops as u64 / 2, "the bank answered only {stat_hits} getattrs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_random_ops_memcached() {
    random_ops(NodeKind::Memcached, 0x1ca_0001, 2500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_random_ops_imca_cache_node() {
    random_ops(NodeKind::Imca, 0x1ca_0002, 2500).await;
}

/// The dissertation's "threaded" mode (writes invalidate synchronously and
/// repopulate later) keeps the same promise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_random_ops_threaded_mode() {
    random_ops_with(Spec { threaded: true, ..Default::default() }, 0x1ca_0003, 1500).await;
}

/// Every placement, and blocks as small as allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_random_ops_crc32_and_modulo_small_blocks() {
    use volume::Placement;
    random_ops_with(Spec { placement: Placement::Crc32, block_size: 256, ..Default::default() }, 0x1ca_0004, 600).await;
    random_ops_with(Spec { placement: Placement::Modulo, block_size: 4096, ..Default::default() }, 0x1ca_0005, 600).await;
}

/// A corrupted value, or another program's value under our key, is a miss:
/// the application still gets the storage servers' bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_or_foreign_values_are_misses() {
    use cache_bank::{Bank, BankOptions, Keys, Update};
    let p = Pipeline::start(Spec::default());
    let g = &p.gateways[0];
    let new = NewFile { name: "x".into(), fid: FileId::from_random(42), perm: 0o644, owner: Owner::default(), exclusive: false };
    let a = g.create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    let loc = Loc::new("x", Some(a.fid));
    let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    g.write(&loc, 0, Bytes::from(data.clone())).await.unwrap();
    for _ in 0..2 {
        assert_eq!(g.read(&loc, 0, 60_000).await.unwrap(), data); // populates
    }
    let keys = Keys::from_config(&p.config);
    // The attacker's bank: no key (it writes CRC-framed values, as before the MACs).
    let bank = Bank::new(&p.config.nodes, p.config.placement, BankOptions::default());
    let mut ups = vec![Update::Set(keys.stat(a.fid), Bytes::from_static(b"not an IMCa value"))];
    for n in 0..(50_000 / p.config.block_size as u64 + 1) {
        let k = keys.block(a.fid, n);
        // a well-formed block value, but written for another key
        let foreign = cache_bank::value::encode(cache_bank::value::Kind::Block, "some other key", &[0xee; 2048]);
        ups.push(Update::Set(k, if n % 2 == 0 { foreign } else { Bytes::from_static(b"IM\x01Bgarbage") }));
    }
    bank.update(&ups, Some(std::time::Duration::from_secs(10))).await.unwrap();
    for gw in &p.gateways {
        assert_eq!(gw.read(&loc, 0, 60_000).await.unwrap(), data);
        assert_eq!(gw.getattr(&loc).await.unwrap().size, 50_000);
    }
}

/// A block size that does not divide the stripe unit would let a block span
/// two servers (neither could keep it fresh): the gateway then reads data
/// from the storage servers only, and stays correct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_larger_than_the_stripe_unit_are_not_served() {
    let p = Pipeline::start(Spec { block_size: 128 * 1024, stripe_unit: 64 * 1024, ..Default::default() });
    let (g0, g1) = (&p.gateways[0], &p.gateways[1]);
    let new = NewFile { name: "x".into(), fid: FileId::from_random(7), perm: 0o644, owner: Owner::default(), exclusive: false };
    let a = g0.create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    let loc = Loc::new("x", Some(a.fid));
    let before = p.cache_count("read", "hit");
    for round in 0..3u8 {
        let data = Bytes::from(vec![round + 1; 200_000]);
        g0.write(&loc, 0, data.clone()).await.unwrap();
        for g in [g0, g1, g0, g1] {
            assert_eq!(g.read(&loc, 0, 250_000).await.unwrap(), data, "round {round}");
        }
    }
    assert_eq!(p.cache_count("read", "hit"), before);
}

/// A live config change (new epoch and block size): servers switch first,
/// gateways only when their lease brings it. Meanwhile gateways read the
/// old epoch's keys, so servers keep deleting those for one lease — no
/// stale answer at any point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_block_size_change_stays_coherent() {
    let mut p = Pipeline::start(Spec::default());
    // the whole middle phase must fit in one lease (a gateway never uses a
    // config longer than that; here its "lease" is simply never renewed)
    let mut long = p.config.clone();
    long.lease_ms = 120_000;
    p.set_config(long);
    let mut rng = StdRng::seed_from_u64(0x1ca_0006);
    phase(&p, &mut rng, "before", 300).await;
    let mut next = p.config.clone();
    next.epoch += 1;
    next.block_size = 4096;
    p.set_server_config(next.clone());
    phase(&p, &mut rng, "servers switched, gateways not yet", 300).await;
    p.set_gateway_config(next);
    phase(&p, &mut rng, "all switched", 300).await;
}

async fn phase(p: &Pipeline, rng: &mut StdRng, name: &str, n: usize) {
    for i in 0..n {
        let g = rng.random_range(0..2);
        for file in mutate(p, g, rng).await {
            check(p, 1 - g, file, rng, &format!("{name}: op {i}")).await;
        }
    }
}
