//! What the bank trusts: values only with our key's MAC (forged, foreign-
//! keyed and CRC-framed values are counted misses), and nodes that run
//! memcached's ASCII authentication (`-Y`) only once logged in — against
//! Debian's memcached and our own `imca cache-node`.

mod memcached;

use bytes::Bytes;
use cache_bank::value::Kind;
use cache_bank::{Bank, BankOptions, CacheKey, Credentials, Update};
use memcached::Memcached;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use volume::Placement;

fn key(b: u8) -> secret::Key {
    secret::Secret::from_bytes(&[b; 32]).unwrap().key(secret::Purpose::BankValues)
}

fn opts(k: Option<secret::Key>, cred: Option<Credentials>) -> BankOptions {
    BankOptions {
        timeout: Duration::from_millis(1000),
        connect_timeout: Duration::from_millis(1000),
        value_key: k,
        node_credentials: cred,
        ..Default::default()
    }
}

fn rejected(bank: &Bank, reason: &str) -> u64 {
    bank.options().metrics.rejected.with_label_values(&[reason]).get()
}

async fn read_block(bank: &Bank, k: &CacheKey) -> Option<Bytes> {
    let hit = bank.get_many(std::slice::from_ref(k), false).await.pop().flatten()?;
    bank.codec().decode(Kind::Block, &k.key, &hit.value)
}

#[tokio::test]
async fn forged_foreign_and_crc_values_are_counted_misses() {
    let m = Memcached::start();
    let ours = Bank::new(&[m.addr_string()], Placement::Crc32, opts(Some(key(1)), None));
    let k = CacheKey::new("vol:1:b:00ff:0".into());
    let wait = Some(Duration::from_secs(5));

    // ours round-trips, encrypted or not
    ours.update(&[Update::Set(k.clone(), ours.codec().encode(Kind::Block, &k.key, b"real"))], wait).await.unwrap();
    assert_eq!(read_block(&ours, &k).await.as_deref(), Some(&b"real"[..]));
    let enc = Bank::new(&[m.addr_string()], Placement::Crc32, BankOptions { encrypt_values: true, ..opts(Some(key(1)), None) });
    enc.update(&[Update::Set(k.clone(), enc.codec().encode(Kind::Block, &k.key, b"sealed"))], wait).await.unwrap();
    assert_eq!(read_block(&ours, &k).await.as_deref(), Some(&b"sealed"[..]), "a plain reader opens encrypted values");

    // a forgery written straight to the node with an ordinary memcached client:
    // the right header and a made-up tag
    let client = memcache::connect(format!("memcache://{}?protocol=ascii", m.addr_string())).unwrap();
    let mut forged = b"IM\x02B".to_vec();
    forged.extend_from_slice(&[0u8; 16]);
    forged.extend_from_slice(b"evil");
    client.set(&k.key, &forged[..], 0).unwrap();
    assert_eq!(read_block(&ours, &k).await, None);
    assert_eq!(rejected(&ours, "mac"), 1);

    // a well-formed value, MAC'd under another volume's key
    let other = Bank::new(&[m.addr_string()], Placement::Crc32, opts(Some(key(2)), None));
    other.update(&[Update::Set(k.clone(), other.codec().encode(Kind::Block, &k.key, b"theirs"))], wait).await.unwrap();
    assert_eq!(read_block(&ours, &k).await, None);
    assert_eq!(rejected(&ours, "mac"), 2);

    // the old CRC framing (anyone can compute it; what an --insecure daemon writes)
    let crc = cache_bank::value::encode(Kind::Block, &k.key, b"crc");
    client.set(&k.key, &crc[..], 0).unwrap();
    assert_eq!(read_block(&ours, &k).await, None);
    assert_eq!(rejected(&ours, "insecure_value"), 1);
    // and an insecure bank refuses our keyed values in turn
    let insecure = Bank::new(&[m.addr_string()], Placement::Crc32, opts(None, None));
    ours.update(&[Update::Set(k.clone(), ours.codec().encode(Kind::Block, &k.key, b"keyed"))], wait).await.unwrap();
    assert_eq!(read_block(&insecure, &k).await, None);
    assert_eq!(rejected(&insecure, "keyed_value"), 1);
}

fn authfile(dir: &std::path::Path) -> String {
    let p = dir.join("memcached-auth");
    std::fs::write(&p, "imca:s3cret-pw\nother:x\n").unwrap();
    // memcached reads it after dropping to `nobody`
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p.to_str().unwrap().to_string()
}

/// A bank with the right login hits; with a wrong one or none it misses,
/// fails writes in bounded time, and the node stays up for the right one.
async fn login_rules(addr: String) {
    let right = Credentials::parse("imca:s3cret-pw").unwrap();
    let wrong = Credentials::parse("imca:guess").unwrap();
    let k = CacheKey::new("vol:1:s:0001".into());
    let good = Bank::new(std::slice::from_ref(&addr), Placement::Crc32, opts(Some(key(1)), Some(right)));
    let v = good.codec().encode(Kind::Block, &k.key, b"v");
    good.update(&[Update::Set(k.clone(), v)], Some(Duration::from_secs(5))).await.unwrap();
    assert_eq!(read_block(&good, &k).await.as_deref(), Some(&b"v"[..]));

    for cred in [Some(wrong), None] {
        let bad = Bank::new(std::slice::from_ref(&addr), Placement::Crc32, opts(Some(key(1)), cred.clone()));
        assert_eq!(read_block(&bad, &k).await, None, "{cred:?}: a miss");
        let t = std::time::Instant::now();
        let r = bad.update(&[Update::Delete(k.clone())], Some(Duration::from_millis(500))).await;
        assert!(r.is_err() && t.elapsed() < Duration::from_secs(5), "{cred:?}: a write fails, in bounded time: {r:?}");
        assert_eq!(bad.status().await, vec![(addr.clone(), false)], "{cred:?}: the node is down for this bank");
    }
    assert_eq!(read_block(&good, &k).await.as_deref(), Some(&b"v"[..]), "the node lived, and kept the value");
}

#[tokio::test]
async fn debian_memcached_with_auth_serves_only_a_logged_in_bank() {
    let dir = tempfile::tempdir().unwrap();
    let m = Memcached::with(&["-Y", &authfile(dir.path())]);
    login_rules(m.addr_string()).await;
}

#[tokio::test]
async fn our_cache_node_with_auth_serves_only_a_logged_in_bank() {
    let dir = tempfile::tempdir().unwrap();
    let users = cache_node::auth::Users::load(std::path::Path::new(&authfile(dir.path()))).unwrap();
    let cfg = cache_node::Config { threads: 1, auth: Some(std::sync::Arc::new(users)), ..cache_node::Config::local() };
    let node = cache_node::start(cfg).await.unwrap();
    login_rules(node.addr.to_string()).await;
    node.shutdown().await;
}

#[tokio::test]
async fn a_node_without_auth_never_keeps_the_password() {
    let m = Memcached::start();
    let cred = Credentials::parse("imca:s3cret-pw").unwrap();
    let bank = Bank::new(&[m.addr_string()], Placement::Crc32, opts(Some(key(1)), Some(cred)));
    let k = CacheKey::new("k".into());
    bank.update(&[Update::Set(k.clone(), Bytes::from_static(b"v"))], Some(Duration::from_secs(5))).await.unwrap();
    let client = memcache::connect(format!("memcache://{}?protocol=ascii", m.addr_string())).unwrap();
    let login: Option<Vec<u8>> = client.get("imca:auth").unwrap();
    assert_eq!(login, None, "the login line was stored already expired");
}
