//! What framing a value costs: encode + decode of one stat-sized (128 B)
//! value, one 4 KiB and one 128 KiB block under each framing the bank could use — today's CRC32
//! (`--insecure`), keyed BLAKE3 (the default), HMAC-SHA256 (the alternative
//! the issue asked to measure; not used), and XChaCha20-Poly1305
//! (`--cache-encrypt`). Numbers in docs/benchmarks/archive/issue-13-trust.md; they are only
//! meaningful with the crypto crates optimised:
//!
//! ```text
//! cargo test -p cache-bank --test value_cost --config 'profile.dev.package."*".opt-level=3' \
//!     --config 'profile.dev.package.cache-bank.opt-level=3' -- --ignored --nocapture
//! ```

use bytes::Bytes;
use cache_bank::value::{self, Kind};
use cache_bank::{BankMetrics, Codec};
use hmac::{Hmac, Mac};
use std::hint::black_box;
use std::time::{Duration, Instant};

const KEY: &str = "vol:7:b:0123456789abcdef0123456789abcdef:42";

/// ns per call of `f`, over at least `min` of running.
fn time(min: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..16 {
        f();
    }
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < min {
        for _ in 0..64 {
            f();
        }
        n += 64;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// HMAC-SHA256 over the same parts as the BLAKE3 MAC, truncated to 16 bytes.
fn hmac_frame(key: &[u8; 32], payload: &[u8]) -> Bytes {
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
    for p in [&b"IMCa bank value"[..], &[2, b'B'], KEY.as_bytes(), payload] {
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    let tag = m.finalize().into_bytes();
    let mut v = Vec::with_capacity(20 + payload.len());
    v.extend_from_slice(b"IM\x02B");
    v.extend_from_slice(&tag[..16]);
    v.extend_from_slice(payload);
    Bytes::from(v)
}

fn hmac_check(key: &[u8; 32], v: &Bytes) -> Option<Bytes> {
    let payload = v.slice(20..);
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).unwrap();
    for p in [&b"IMCa bank value"[..], &[2, b'B'], KEY.as_bytes(), &payload] {
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    m.verify_truncated_left(&v[4..20]).ok().map(|_| payload)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture and optimised crypto (see the file's header)"]
fn encode_and_decode_cost_per_value() {
    let raw = [0x5a; 32];
    let key = secret::Key::from_raw(raw);
    let mac = Codec::new(Some(key.clone()), false, BankMetrics::default());
    let aead = Codec::new(Some(key), true, BankMetrics::default());
    let min = Duration::from_millis(700);
    if cfg!(debug_assertions) {
        println!("(debug assertions on: see the header for the optimised command)");
    }
    let head = |what: &str| {
        println!("{what}");
        println!("{:>8} {:>22} {:>22} {:>22} {:>22}", "value", "crc32", "blake3 (default)", "hmac-sha256", "xchacha20-poly1305");
    };
    head("encode + decode (a populate, then a hit)");
    let mut decode_rows = Vec::new();
    for size in [128usize, 4096, 128 << 10] {
        let payload: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let crc = time(min, || {
            let v = value::encode(Kind::Block, KEY, black_box(&payload));
            assert!(value::decode(Kind::Block, KEY, &v).is_some());
        });
        let b3 = time(min, || {
            let v = mac.encode(Kind::Block, KEY, black_box(&payload));
            assert!(mac.decode(Kind::Block, KEY, &v).is_some());
        });
        let hm = time(min, || {
            let v = hmac_frame(&raw, black_box(&payload));
            assert!(hmac_check(&raw, &v).is_some());
        });
        let ae = time(min, || {
            let v = aead.encode(Kind::Block, KEY, black_box(&payload));
            assert!(aead.decode(Kind::Block, KEY, &v).is_some());
        });
        // decode alone: what every read of a cached value pays
        let (vc, vm) = (value::encode(Kind::Block, KEY, &payload), mac.encode(Kind::Block, KEY, &payload));
        let (vh, va) = (hmac_frame(&raw, &payload), aead.encode(Kind::Block, KEY, &payload));
        let d = [
            time(min, || assert!(value::decode(Kind::Block, KEY, black_box(&vc)).is_some())),
            time(min, || assert!(mac.decode(Kind::Block, KEY, black_box(&vm)).is_some())),
            time(min, || assert!(hmac_check(&raw, black_box(&vh)).is_some())),
            time(min, || assert!(aead.decode(Kind::Block, KEY, black_box(&va)).is_some())),
        ];
        let cell = |ns: f64| format!("{:>8.2} µs {:>6.2} GB/s", ns / 1000.0, size as f64 / ns);
        let name = if size < 1024 { format!("{size} B") } else { format!("{} KiB", size >> 10) };
        decode_rows.push(format!("{name:>8} {} {} {} {}", cell(d[0]), cell(d[1]), cell(d[2]), cell(d[3])));
        println!("{name:>8} {} {} {} {}", cell(crc), cell(b3), cell(hm), cell(ae));
    }
    head("decode only (a hit)");
    for r in decode_rows {
        println!("{r}");
    }
}
