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
//!
//! `<vol>` is the volume name verbatim: `volume::name` allows only names
//! that are valid in a key and contain no `:`, so distinct volumes sharing
//! a bank (`a.b` and `a_b`) never share a key. Nothing here rewrites a name;
//! a config with a name the rule refuses never gets a layout
//! (`volume::usable`).

use crate::placement::CacheKey;
use volume::CacheConfig;
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

impl Keys {
    /// `volume` must follow `volume::name`'s rule (checked by every config's
    /// validation, and by `volume::usable` before a layout is built).
    pub fn new(volume: &str, epoch: u64, block_size: u32) -> Keys {
        debug_assert!(volume::name::check_name(volume).is_ok(), "volume name {volume:?} reached the key builder");
        Keys { prefix: format!("imca:{volume}:{epoch}"), block_size }
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
        // the longest name the rule allows, with its every character, at the largest numbers
        let name: String = "Az09._-".chars().cycle().take(volume::name::MAX_NAME_LEN).collect();
        let k = Keys::new(&name, u64::MAX, u32::MAX);
        let fid = FileId(u128::MAX);
        for key in [k.stat(fid), k.dentry(fid, &"x".repeat(255)), k.block(fid, u64::MAX)] {
            assert!(key.key.len() <= 250, "{}", key.key);
            assert!(key.key.bytes().all(|b| b.is_ascii_graphic()), "{}", key.key);
        }
    }

    #[test]
    fn volume_names_are_used_verbatim_so_similar_names_never_share_a_key() {
        let fid = FileId(7);
        let (dot, underscore) = (Keys::new("a.b", 1, 4096), Keys::new("a_b", 1, 4096));
        assert_ne!(dot.stat(fid), underscore.stat(fid));
        assert_ne!(dot.dentry(fid, "x"), underscore.dentry(fid, "x"));
        assert_ne!(dot.block(fid, 0), underscore.block(fid, 0));
        assert!(dot.stat(fid).key.starts_with("imca:a.b:1:s:"), "{}", dot.stat(fid).key);
        // a name is never cut: two long names differing only at the end stay apart
        let long = "v".repeat(volume::name::MAX_NAME_LEN - 1);
        assert_ne!(Keys::new(&format!("{long}1"), 1, 4096).stat(fid), Keys::new(&format!("{long}2"), 1, 4096).stat(fid));
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
