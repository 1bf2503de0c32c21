//! Cache keys: by volume, epoch, file id and block size — never by path
//! (a path breaks on rename, hard links and over-long names; a file id does
//! not). Every key stays within memcached's rules: at most 250 bytes, no
//! spaces or control characters.
//!
//! ```text
//! imca:<vol>:<epoch>:s:<fid>                      merged stat of a file
//! imca:<vol>:<epoch>:d:<parent fid>:<name hash>   directory entry
//! imca:<vol>:<epoch>:b:<block size>:<fid>:<n>     data block n
//! ```

use crate::placement::CacheKey;
use xlator::volume::CacheConfig;
use xlator::FileId;

/// Builds the keys of one volume at one epoch and block size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
    pub block_size: u32,
}

/// FNV-1a: stable across builds and platforms (gateways and servers of
/// different builds must agree on every key).
pub fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn safe_volume(v: &str) -> String {
    let s: String =
        v.chars().take(48).map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
    if s.is_empty() {
        "vol".into()
    } else {
        s
    }
}

impl Keys {
    pub fn new(volume: &str, epoch: u64, block_size: u32) -> Keys {
        Keys { prefix: format!("imca:{}:{}", safe_volume(volume), epoch), block_size }
    }

    pub fn from_config(c: &CacheConfig) -> Keys {
        Keys::new(&c.volume, c.epoch, c.block_size)
    }

    pub fn stat(&self, fid: FileId) -> CacheKey {
        CacheKey::new(format!("{}:s:{}", self.prefix, fid.to_hex()))
    }

    pub fn dentry(&self, parent: FileId, name: &str) -> CacheKey {
        CacheKey::new(format!("{}:d:{}:{:016x}", self.prefix, parent.to_hex(), fnv64(name.as_bytes())))
    }

    /// Block `n` of `fid`. Its stripe number makes modulo placement put a
    /// file's consecutive blocks on consecutive nodes.
    pub fn block(&self, fid: FileId, n: u64) -> CacheKey {
        CacheKey {
            key: format!("{}:b:{}:{}:{}", self.prefix, self.block_size, fid.to_hex(), n),
            stripe: Some((fid.0 as u64).wrapping_add(n)),
        }
    }

    /// Blocks covering `[offset, offset + len)`: (first, last) inclusive.
    pub fn covering(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        if len == 0 {
            return None;
        }
        let bs = self.block_size as u64;
        Some((offset / bs, (offset + len - 1) / bs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_memcached_rules() {
        let k = Keys::new("a volume with spaces and ünïcode and a very long name indeed, longer than any", u64::MAX, 1 << 20);
        let fid = FileId(u128::MAX);
        for key in [k.stat(fid), k.dentry(fid, &"x".repeat(255)), k.block(fid, u64::MAX)] {
            assert!(key.key.len() <= 250, "{}", key.key);
            assert!(key.key.bytes().all(|b| b.is_ascii_graphic()), "{}", key.key);
        }
    }

    #[test]
    fn epoch_and_block_size_change_every_key() {
        let fid = FileId(7);
        let a = Keys::new("v", 1, 2048);
        assert_ne!(a.block(fid, 0), Keys::new("v", 2, 2048).block(fid, 0));
        assert_ne!(a.block(fid, 0), Keys::new("v", 1, 4096).block(fid, 0));
        assert_ne!(a.stat(fid), Keys::new("v", 2, 2048).stat(fid));
        assert_ne!(a.dentry(fid, "x"), a.dentry(fid, "y"));
    }

    #[test]
    fn covering_blocks() {
        let k = Keys::new("v", 1, 2048);
        assert_eq!(k.covering(0, 1), Some((0, 0)));
        assert_eq!(k.covering(2047, 2), Some((0, 1)));
        assert_eq!(k.covering(4096, 4096), Some((2, 3)));
        assert_eq!(k.covering(5, 0), None);
    }
}
