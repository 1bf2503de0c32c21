//! A key as the store's LRU map (`store.rs`) holds it: short keys inline
//! in the map's entry, longer ones boxed.
//!
//! A lookup compares the key it looks for with the entry's; with every key
//! boxed that was one more cache miss per key after the entry's own (the
//! `memcmp` of a multi-get's profile, docs/benchmarks/archive/cache-node-vs-memcached.md). Keys of
//! the bank (and memaslap's 16 B keys) fit inline; memcached's longest (250 B)
//! are boxed as before.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Keys up to this long are held inline.
const INLINE: usize = 30;

#[derive(Clone)]
pub enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Boxed(Box<[u8]>),
}

impl From<&[u8]> for Key {
    fn from(k: &[u8]) -> Key {
        if k.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..k.len()].copy_from_slice(k);
            Key::Inline { len: k.len() as u8, bytes }
        } else {
            Key::Boxed(k.into())
        }
    }
}

impl Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Boxed(b) => b,
        }
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self
    }
}

// Hash and Eq as the bytes, as `Borrow<[u8]>` requires: the map is
// searched with plain `&[u8]` keys.
impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (**self).hash(h)
    }
}

impl PartialEq for Key {
    fn eq(&self, o: &Key) -> bool {
        **self == **o
    }
}

impl Eq for Key {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_inline_long_ones_boxed_same_bytes() {
        let long = [b'k'; 250];
        for k in [&b""[..], b"k", &[b'x'; INLINE], &[b'y'; INLINE + 1], &long] {
            let key = Key::from(k);
            assert_eq!(&*key, k);
            assert_eq!(matches!(key, Key::Inline { .. }), k.len() <= INLINE);
        }
        let mut m = std::collections::HashMap::new();
        m.insert(Key::from(&b"abc"[..]), 1);
        m.insert(Key::from(&long[..]), 2);
        assert_eq!((m.get(&b"abc"[..]), m.get(&long[..]), m.get(&b"abd"[..])), (Some(&1), Some(&2), None));
    }
}
