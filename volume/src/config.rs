//! The volume's cache configuration: what every gateway and storage server of
//! a volume must agree on before touching the cache bank.
//!
//! Storage servers are the authority: each keeps the current [`CacheConfig`]
//! in its export (`.imca/volume.json`) and stamps its `epoch` on every reply.
//! A gateway that sees a newer epoch (or whose lease of `lease_ms` runs out)
//! fetches the config again. Changing the block size, the placement or the
//! node pool bumps the epoch, and the epoch is part of every cache key, so no
//! reader ever mixes blocks of two layouts; old keys age out of the LRU.
//!
//! The rules a config must follow are in [`crate::options`] (one table,
//! checked by [`crate::validate`]); this module is only the shape.

use serde::{Deserialize, Serialize};

/// How keys are spread over the bank's nodes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// crc32(key) mod nodes — the dissertation's default
    Crc32,
    /// consecutive blocks of a file round-robin over nodes — the dissertation's throughput mode
    Modulo,
    /// ketama-compatible consistent hashing: a pool change moves ~1/M of the keys
    #[default]
    Consistent,
}

pub const DEFAULT_BLOCK_SIZE: u32 = 128 * 1024;
pub const DEFAULT_LEASE_MS: u64 = 1000;
pub const DEFAULT_BANK_TIMEOUT_MS: u64 = 5;
pub const DEFAULT_VOLUME: &str = "vol0";

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheConfig {
    /// bumped by every change; part of every cache key
    pub epoch: u64,
    /// volume name, used verbatim in every cache key (several volumes may
    /// share a bank); see [`crate::name`] for what a name may be
    pub volume: String,
    /// cache-node addresses (host:port); empty = no cache
    pub nodes: Vec<String>,
    /// nodes taken out of `nodes` because an update to them could not be
    /// confirmed (frozen, partitioned): nobody uses them until they answer
    /// again, are flushed and come back under a new epoch (see [`crate::fence`])
    pub fenced: Vec<String>,
    /// data block size in bytes (range: [`crate::options`])
    pub block_size: u32,
    pub placement: Placement,
    /// a bank request slower than this is a miss
    pub timeout_ms: u64,
    /// gateways refresh this config at least this often
    pub lease_ms: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            epoch: 1,
            volume: DEFAULT_VOLUME.into(),
            nodes: Vec::new(),
            fenced: Vec::new(),
            block_size: DEFAULT_BLOCK_SIZE,
            placement: Placement::default(),
            timeout_ms: DEFAULT_BANK_TIMEOUT_MS,
            lease_ms: DEFAULT_LEASE_MS,
        }
    }
}
