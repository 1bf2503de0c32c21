//! # secret — the volume secret and the keys derived from it
//!
//! Every daemon of one volume holds the same secret, a file of 32 random
//! bytes (hex, mode 0600) that `imca up` or `imca secret new` creates. The
//! secret itself is never used on the wire and never leaves the file's
//! readers; each use gets its own key, derived with BLAKE3's key-derivation
//! mode under a fixed context string ([`Purpose`]), so a key seen by one
//! layer (say, a MAC key in a cache-node dump) says nothing about another.
//!
//! ```text
//!  volume.secret ─derive─> Purpose::RpcHandshake  transport: challenge/response at connect
//!                ├derive─> Purpose::BankValues    cache-bank: MAC of every cached value
//!                └derive─> Purpose::BankLogin     cache nodes' login (memcached -Y): only the volume writes its bank
//! ```
//!
//! MACs are BLAKE3 in keyed mode over length-prefixed parts (so `("ab","c")`
//! and `("a","bc")` differ), compared in constant time.

mod file;

pub use file::{SecretError, MIN_SECRET_BYTES};

use std::fmt;

/// What a derived key is for. Each has its own context string; never reuse
/// one for another purpose, and never change one (keys would change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Mutual authentication of storage-RPC connections (TCP and RDMA).
    RpcHandshake,
    /// MACs (and the optional encryption) of values stored in the cache bank.
    BankValues,
    /// The password the volume's daemons log in to its cache nodes with
    /// (memcached's `-Y` auth file; `imca secret cache-auth` writes it).
    BankLogin,
}

impl Purpose {
    fn context(self) -> &'static str {
        match self {
            Purpose::RpcHandshake => "IMCa 2026-11 storage RPC handshake",
            Purpose::BankValues => "IMCa 2026-11 cache bank values",
            Purpose::BankLogin => "IMCa 2026-11 cache node login",
        }
    }
}

/// The volume secret. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A fresh random secret.
    pub fn generate() -> Secret {
        let mut b = vec![0u8; MIN_SECRET_BYTES];
        rand::fill(&mut b[..]);
        Secret(b)
    }

    /// A secret from raw bytes (tests, and `file`). At least
    /// [`MIN_SECRET_BYTES`].
    pub fn from_bytes(b: &[u8]) -> Result<Secret, SecretError> {
        if b.len() < MIN_SECRET_BYTES {
            return Err(SecretError::TooShort(b.len()));
        }
        Ok(Secret(b.to_vec()))
    }

    /// The key for `purpose`.
    pub fn key(&self, purpose: Purpose) -> Key {
        Key(blake3::derive_key(purpose.context(), &self.0))
    }

    /// The file form: lower-case hex and a newline.
    pub fn to_hex(&self) -> String {
        let mut s: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        s.push('\n');
        s
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// 32 fresh random bytes: a handshake challenge.
pub fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    rand::fill(&mut n[..]);
    n
}

/// A 256-bit key for one purpose. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; 32]);

/// A MAC, as sent on the wire or stored beside a value.
pub type Tag = [u8; 32];

impl Key {
    /// A key from raw bytes (tests; callers normally derive from a [`Secret`]).
    pub fn from_raw(k: [u8; 32]) -> Key {
        Key(k)
    }

    /// The raw bytes, for an algorithm that takes a key directly (an AEAD).
    pub fn raw(&self) -> &[u8; 32] {
        &self.0
    }

    /// A keyed BLAKE3 MAC over `parts`, each length-prefixed.
    pub fn mac(&self, parts: &[&[u8]]) -> Tag {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        for p in parts {
            h.update(&(p.len() as u64).to_le_bytes());
            h.update(p);
        }
        *h.finalize().as_bytes()
    }

    /// Whether `tag` (which may be a truncated tag of at least 16 bytes) is the
    /// MAC of `parts`; constant time in the tag's contents.
    pub fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        if tag.len() < 16 || tag.len() > 32 {
            return false;
        }
        let want = self.mac(parts);
        let diff = want[..tag.len()].iter().zip(tag).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_give_different_keys_and_macs_bind_part_boundaries() {
        let s = Secret::from_bytes(&[7u8; 32]).unwrap();
        let (a, b) = (s.key(Purpose::RpcHandshake), s.key(Purpose::BankValues));
        assert_ne!(a, b);
        assert_ne!(a.mac(&[b"ab", b"c"]), a.mac(&[b"a", b"bc"]));
        let t = a.mac(&[b"x"]);
        assert!(a.verify(&[b"x"], &t));
        assert!(a.verify(&[b"x"], &t[..16]));
        assert!(!a.verify(&[b"x"], &t[..15]), "a tag shorter than 128 bits is never accepted");
        assert!(!b.verify(&[b"x"], &t));
        assert!(!a.verify(&[b"y"], &t));
    }

    #[test]
    fn debug_hides_secrets() {
        let s = Secret::generate();
        assert_eq!(format!("{s:?}"), "Secret(..)");
        assert_eq!(format!("{:?}", s.key(Purpose::BankValues)), "Key(..)");
        assert_ne!(Secret::generate(), s);
    }
}
