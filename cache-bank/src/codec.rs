//! How a bank frames the values it stores and checks the values it reads.
//!
//! Anyone who can reach a cache node can write to it, so a value read from
//! the bank is only trusted when it proves it was written by a daemon of
//! this volume, for this key and this kind. Three framings, told apart by
//! the version byte, so a reader recognises all of them:
//!
//! ```text
//!  v1 CRC   "IM" 1 kind | crc32(key) len crc32(payload) | payload        --insecure volumes (value.rs)
//!  v2 MAC   "IM" 2 kind | mac16                          | payload        keyed (the default)
//!  v3 AEAD  "IM" 3 kind | nonce24                        | ciphertext tag16   keyed + encrypt_values
//!
//!  mac16 = BLAKE3-keyed(value key; "IMCa bank value", [2, kind], key, BLAKE3(payload))[..16]
//!  AEAD  = XChaCha20-Poly1305(derive(value key), random nonce; aad = "IM" 3 kind key)
//! ```
//!
//! A bank with a key accepts only v2 and v3 (so a forged CRC value, or one
//! written by a daemon started `--insecure`, is refused); a bank without one
//! accepts only v1. Whether to encrypt is each writer's choice; every keyed
//! reader reads both v2 and v3, so daemons need not agree. A refused value
//! is a miss, counted and logged by [`crate::rejects`].
//!
//! The payload is hashed on its own first (hash-then-MAC; BLAKE3 is
//! collision resistant) so that its chunks start aligned and BLAKE3 hashes
//! them in parallel: half the cost of one keyed pass at 4 KiB (numbers in
//! docs/benchmarks/archive/issue-13-trust.md, which also has HMAC-SHA256 and the AEAD).
//!
//! What the MAC does not stop: a writer on the cache network replaying an
//! older value of the *same* key (a stale block until the next invalidation).
//! Node authentication (`-Y`, [`crate::Credentials`]) is what keeps such a
//! writer off the nodes.

use crate::metrics::BankMetrics;
use crate::rejects::{self, Reason};
use crate::value::{self, Kind};
use bytes::{BufMut, Bytes, BytesMut};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const MAGIC: &[u8; 2] = b"IM";
const V_MAC: u8 = 2;
const V_AEAD: u8 = 3;
const TAG: usize = 16;
const NONCE: usize = 24;
/// "IM", version, kind, then the tag (v2) or nonce (v3).
const MAC_HEADER: usize = 4 + TAG;
const AEAD_HEADER: usize = 4 + NONCE;
/// Keeps the value MAC apart from any other use of the same key.
const MAC_DOMAIN: &[u8] = b"IMCa bank value";
/// The AEAD key is derived from the value key, never the value key itself.
const AEAD_CONTEXT: &str = "IMCa 2026-11 cache bank value encryption";

enum Mode {
    Crc,
    /// `aead` opens encrypted values whether or not we `encrypt` our own
    Keyed { mac: secret::Key, aead: Box<XChaCha20Poly1305>, encrypt: bool },
}

/// One bank's value framing (see the module page). Built by the bank from
/// its options; CMCache, SMCache and the test kit reach it through
/// [`Bank::codec`](crate::Bank::codec).
pub struct Codec {
    mode: Mode,
    metrics: BankMetrics,
    /// the placeholder claims are made with (always MAC-framed, never
    /// encrypted: one constant value serves every claim, compared bytewise)
    placeholder: Bytes,
}

impl Codec {
    /// `key`: the volume's `Purpose::BankValues` key, `None` = CRC framing
    /// (`--insecure`). `encrypt` applies only with a key.
    pub fn new(key: Option<secret::Key>, encrypt: bool, metrics: BankMetrics) -> Codec {
        let mode = match key {
            None => Mode::Crc,
            Some(k) => {
                let derived = blake3::derive_key(AEAD_CONTEXT, k.raw());
                let aead = Box::new(XChaCha20Poly1305::new((&derived).into()));
                Mode::Keyed { mac: k, aead, encrypt }
            }
        };
        let mut c = Codec { mode, metrics, placeholder: Bytes::new() };
        c.placeholder = match &c.mode {
            Mode::Crc => value::encode(Kind::Placeholder, "", b""),
            Mode::Keyed { mac, .. } => mac_frame(mac, Kind::Placeholder, "", b""),
        };
        c
    }

    /// CRC framing, counting into unexported metrics (tools and tests).
    pub fn insecure() -> Codec {
        Codec::new(None, false, BankMetrics::default())
    }

    pub fn is_keyed(&self) -> bool {
        matches!(self.mode, Mode::Keyed { .. })
    }

    pub fn encrypts(&self) -> bool {
        matches!(self.mode, Mode::Keyed { encrypt: true, .. })
    }

    /// The value to store under `key` for `payload`.
    pub fn encode(&self, kind: Kind, key: &str, payload: &[u8]) -> Bytes {
        match &self.mode {
            Mode::Crc => value::encode(kind, key, payload),
            Mode::Keyed { mac, encrypt: false, .. } => mac_frame(mac, kind, key, payload),
            Mode::Keyed { aead, encrypt: true, .. } => seal(aead, kind, key, payload),
        }
    }

    /// The payload of `v`, if it is an intact value of `kind` written for
    /// `key` by a daemon holding our key (or, without a key, an intact CRC
    /// value). Anything else is a miss, counted and logged as a rejection,
    /// except a claim's placeholder (an ordinary miss: someone is populating).
    pub fn decode(&self, kind: Kind, key: &str, v: &Bytes) -> Option<Bytes> {
        if self.is_placeholder(v) {
            return None;
        }
        match self.check(kind, key, v) {
            Ok(p) => Some(p),
            Err(reason) => {
                rejects::note(&self.metrics, reason, key);
                None
            }
        }
    }

    fn check(&self, kind: Kind, key: &str, v: &Bytes) -> Result<Bytes, Reason> {
        if v.len() < 4 || &v[..2] != MAGIC {
            return Err(Reason::Foreign);
        }
        let (version, got_kind) = (v[2], v[3]);
        let Mode::Keyed { mac, aead, .. } = &self.mode else {
            return match version {
                value::VERSION => value::decode(kind, key, v).ok_or(Reason::Checksum),
                V_MAC | V_AEAD => Err(Reason::KeyedValue),
                _ => Err(Reason::Foreign),
            };
        };
        match version {
            value::VERSION => return Err(Reason::InsecureValue),
            V_MAC | V_AEAD => {}
            _ => return Err(Reason::Foreign),
        }
        if got_kind != kind as u8 {
            return Err(Reason::Kind);
        }
        if version == V_MAC {
            if v.len() < MAC_HEADER {
                return Err(Reason::Foreign);
            }
            let payload = v.slice(MAC_HEADER..);
            let h = blake3::hash(&payload);
            return if mac.verify(&mac_parts(kind, key, h.as_bytes()), &v[4..MAC_HEADER]) {
                Ok(payload)
            } else {
                Err(Reason::Mac)
            };
        }
        if v.len() < AEAD_HEADER + TAG {
            return Err(Reason::Foreign);
        }
        open(aead, kind, key, v).ok_or(Reason::Decrypt)
    }

    /// The placeholder claims are made with (see [`crate::Bank::claim_many`]).
    pub fn placeholder(&self) -> &Bytes {
        &self.placeholder
    }

    /// Whether `v` is a claim's placeholder (never counted as a rejection).
    pub fn is_placeholder(&self, v: &[u8]) -> bool {
        v == &self.placeholder[..]
    }
}

/// What the MAC covers; `digest` is BLAKE3 of the payload.
fn mac_parts<'a>(kind: Kind, key: &'a str, digest: &'a [u8]) -> [&'a [u8]; 4] {
    // the version and kind bytes are 'static per call site; a small array
    // keeps this allocation-free
    let vk: &'static [u8] = match kind {
        Kind::Stat => &[V_MAC, Kind::Stat as u8],
        Kind::Dentry => &[V_MAC, Kind::Dentry as u8],
        Kind::Block => &[V_MAC, Kind::Block as u8],
        Kind::Placeholder => &[V_MAC, Kind::Placeholder as u8],
    };
    [MAC_DOMAIN, vk, key.as_bytes(), digest]
}

fn mac_frame(mac: &secret::Key, kind: Kind, key: &str, payload: &[u8]) -> Bytes {
    let h = blake3::hash(payload);
    let tag = mac.mac(&mac_parts(kind, key, h.as_bytes()));
    let mut b = BytesMut::with_capacity(MAC_HEADER + payload.len());
    b.put_slice(MAGIC);
    b.put_u8(V_MAC);
    b.put_u8(kind as u8);
    b.put_slice(&tag[..TAG]);
    b.put_slice(payload);
    b.freeze()
}

fn aad(kind: Kind, key: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(4 + key.len());
    a.extend_from_slice(MAGIC);
    a.push(V_AEAD);
    a.push(kind as u8);
    a.extend_from_slice(key.as_bytes());
    a
}

fn seal(aead: &XChaCha20Poly1305, kind: Kind, key: &str, payload: &[u8]) -> Bytes {
    let mut nonce = [0u8; NONCE];
    rand::fill(&mut nonce[..]);
    let mut b = Vec::with_capacity(AEAD_HEADER + payload.len() + TAG);
    b.extend_from_slice(MAGIC);
    b.push(V_AEAD);
    b.push(kind as u8);
    b.extend_from_slice(&nonce);
    b.extend_from_slice(payload);
    let tag = aead
        .encrypt_in_place_detached(XNonce::from_slice(&nonce), &aad(kind, key), &mut b[AEAD_HEADER..])
        .expect("XChaCha20-Poly1305 encrypts any length a value can have");
    b.extend_from_slice(&tag);
    Bytes::from(b)
}

fn open(aead: &XChaCha20Poly1305, kind: Kind, key: &str, v: &Bytes) -> Option<Bytes> {
    let nonce = XNonce::from_slice(&v[4..AEAD_HEADER]);
    let (body, tag) = v[AEAD_HEADER..].split_at(v.len() - AEAD_HEADER - TAG);
    let mut plain = body.to_vec();
    aead.decrypt_in_place_detached(nonce, &aad(kind, key), &mut plain, tag.into()).ok()?;
    Some(Bytes::from(plain))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> secret::Key {
        secret::Key::from_raw([b; 32])
    }

    fn keyed(b: u8, encrypt: bool) -> Codec {
        Codec::new(Some(key(b)), encrypt, BankMetrics::default())
    }

    fn rejected(c: &Codec, reason: &str) -> u64 {
        c.metrics.rejected.with_label_values(&[reason]).get()
    }

    #[test]
    fn each_framing_round_trips_and_binds_key_and_kind() {
        for c in [Codec::insecure(), keyed(1, false), keyed(1, true)] {
            let v = c.encode(Kind::Block, "k1", b"hello");
            assert_eq!(c.decode(Kind::Block, "k1", &v).as_deref(), Some(&b"hello"[..]));
            assert!(c.decode(Kind::Block, "k2", &v).is_none(), "stored under another key");
            assert!(c.decode(Kind::Stat, "k1", &v).is_none(), "another kind");
            for i in 0..v.len() {
                let mut bad = v.to_vec();
                bad[i] ^= 0x40;
                assert!(c.decode(Kind::Block, "k1", &Bytes::from(bad)).is_none(), "flip at {i}");
            }
            assert!(c.decode(Kind::Block, "k1", &v.slice(..v.len() - 1)).is_none(), "truncated");
            let empty = c.encode(Kind::Block, "k1", b"");
            assert_eq!(c.decode(Kind::Block, "k1", &empty).as_deref(), Some(&b""[..]));
        }
    }

    #[test]
    fn keyed_banks_refuse_other_keys_and_crc_values_and_vice_versa() {
        let (a, b, crc) = (keyed(1, false), keyed(2, true), Codec::insecure());
        let from_b = b.encode(Kind::Stat, "k", b"x");
        assert!(a.decode(Kind::Stat, "k", &from_b).is_none());
        assert_eq!(rejected(&a, "decrypt"), 1, "an encrypted value under another key does not open");
        let from_b_mac = keyed(2, false).encode(Kind::Stat, "k", b"x");
        assert!(a.decode(Kind::Stat, "k", &from_b_mac).is_none());
        assert_eq!(rejected(&a, "mac"), 1);
        assert!(a.decode(Kind::Stat, "k", &crc.encode(Kind::Stat, "k", b"x")).is_none());
        assert_eq!(rejected(&a, "insecure_value"), 1);
        assert!(crc.decode(Kind::Stat, "k", &a.encode(Kind::Stat, "k", b"x")).is_none());
        assert_eq!(rejected(&crc, "keyed_value"), 1);
        assert!(a.decode(Kind::Stat, "k", &Bytes::from_static(b"some other program's value")).is_none());
        assert_eq!(rejected(&a, "foreign"), 1);
    }

    #[test]
    fn a_keyed_reader_reads_encrypted_and_plain_values_alike() {
        let (plain, enc) = (keyed(3, false), keyed(3, true));
        let v = enc.encode(Kind::Block, "k", b"secret block");
        assert!(!v.windows(12).any(|w| w == b"secret block"), "the payload is not in the clear");
        assert_ne!(v, enc.encode(Kind::Block, "k", b"secret block"), "fresh nonce per value");
        assert_eq!(plain.decode(Kind::Block, "k", &v).as_deref(), Some(&b"secret block"[..]));
        let p = plain.encode(Kind::Block, "k", b"open");
        assert_eq!(enc.decode(Kind::Block, "k", &p).as_deref(), Some(&b"open"[..]));
    }

    #[test]
    fn placeholders_are_misses_not_rejections() {
        for c in [Codec::insecure(), keyed(4, true)] {
            let p = c.placeholder().clone();
            assert!(c.is_placeholder(&p));
            assert!(c.decode(Kind::Stat, "k", &p).is_none());
            assert_eq!(c.metrics.rejected.get_metric_with_label_values(&["kind"]).unwrap().get(), 0);
            assert!(!c.is_placeholder(&c.encode(Kind::Stat, "k", b"")));
        }
        assert!(!keyed(4, false).is_placeholder(keyed(5, false).placeholder()), "placeholders are keyed too");
    }
}
