//! Which node holds a key: CRC32 (the dissertation's default), modulo
//! striping of a file's consecutive blocks (its throughput mode), and
//! ketama-compatible consistent hashing (a pool change moves ~1/M of keys).

use crate::md5;
use volume::Placement;

/// A key as the bank sees it: the memcached key text and, for data blocks,
/// a stripe number (file hash + block number) that modulo placement uses so
/// that consecutive blocks of one file land on consecutive nodes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    pub key: String,
    pub stripe: Option<u64>,
}

impl CacheKey {
    pub fn new(key: String) -> CacheKey {
        CacheKey { key, stripe: None }
    }
}

/// A placement function over a fixed list of nodes.
#[derive(Clone, Debug)]
pub struct Ring {
    placement: Placement,
    nodes: usize,
    /// ketama continuum: (point, node index), sorted by point
    points: Vec<(u32, usize)>,
}

/// libmemcached's MEMCACHED_HASH_CRC: the top half of the CRC32, 15 bits.
pub fn crc32_hash(key: &[u8]) -> u32 {
    (crc32fast::hash(key) >> 16) & 0x7fff
}

/// Ketama's key hash: the first four MD5 bytes, little endian.
pub fn ketama_hash(key: &[u8]) -> u32 {
    let d = md5::digest(key);
    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
}

impl Ring {
    pub fn new(placement: Placement, nodes: &[String]) -> Ring {
        let mut points = Vec::new();
        if placement == Placement::Consistent {
            for (idx, name) in nodes.iter().enumerate() {
                // libmemcached names points "host:port-i", or "host-i" on the default port.
                let base = name.strip_suffix(":11211").unwrap_or(name);
                for i in 0..40 {
                    let d = md5::digest(format!("{base}-{i}").as_bytes());
                    for h in 0..4 {
                        let p = u32::from_le_bytes([d[h * 4], d[h * 4 + 1], d[h * 4 + 2], d[h * 4 + 3]]);
                        points.push((p, idx));
                    }
                }
            }
            points.sort_unstable();
        }
        Ring { placement, nodes: nodes.len(), points }
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The node index for `key`; `None` only when the bank is empty.
    pub fn node_for(&self, key: &CacheKey) -> Option<usize> {
        if self.nodes == 0 {
            return None;
        }
        let n = self.nodes;
        Some(match (self.placement, key.stripe) {
            (Placement::Modulo, Some(s)) => (s % n as u64) as usize,
            (Placement::Modulo, None) | (Placement::Crc32, _) => crc32_hash(key.key.as_bytes()) as usize % n,
            (Placement::Consistent, _) => {
                let h = ketama_hash(key.key.as_bytes());
                let i = self.points.partition_point(|&(p, _)| p < h);
                self.points.get(i).unwrap_or(&self.points[0]).1
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.{i}:11211")).collect()
    }

    fn keys() -> Vec<CacheKey> {
        (0..10_000).map(|i| CacheKey::new(format!("imca:v:1:b:2048:{i:032x}:0"))).collect()
    }

    #[test]
    fn modulo_round_robins_consecutive_blocks() {
        let r = Ring::new(Placement::Modulo, &nodes(4));
        let got: Vec<usize> =
            (0..8).map(|b| r.node_for(&CacheKey { key: format!("k{b}"), stripe: Some(100 + b) }).unwrap()).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn every_placement_spreads_keys() {
        for p in [Placement::Crc32, Placement::Modulo, Placement::Consistent] {
            let r = Ring::new(p, &nodes(4));
            let mut count = [0usize; 4];
            for k in keys() {
                count[r.node_for(&k).unwrap()] += 1;
            }
            for c in count {
                assert!(c > 1500, "{p:?} is lopsided: {count:?}");
            }
        }
    }

    #[test]
    fn consistent_hashing_moves_few_keys_when_a_node_joins() {
        let a = Ring::new(Placement::Consistent, &nodes(4));
        let b = Ring::new(Placement::Consistent, &nodes(5));
        let moved = keys().iter().filter(|k| a.node_for(k) != b.node_for(k)).count();
        // ~1/5 of keys should move to the new node; crc32 modulo would move ~4/5.
        assert!(moved < 3000, "moved {moved} of 10000");
        let c = Ring::new(Placement::Crc32, &nodes(5));
        let d = Ring::new(Placement::Crc32, &nodes(4));
        assert!(keys().iter().filter(|k| c.node_for(k) != d.node_for(k)).count() > 6000);
    }

    #[test]
    fn empty_bank_places_nothing() {
        assert_eq!(Ring::new(Placement::Consistent, &[]).node_for(&CacheKey::new("x".into())), None);
    }
}
