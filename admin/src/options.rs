//! The volume's cache options in one table (GlusterFS-style): name, type,
//! range, default, description. The same table validates `PUT /api/v1/config`,
//! is served at `GET /api/v1/options` and is printed by `imca ctl options`.

use serde::Serialize;
use xlator::volume::{DEFAULT_BANK_TIMEOUT_MS, DEFAULT_BLOCK_SIZE, DEFAULT_LEASE_MS};

/// Smallest data block: below this the per-item overhead of memcached
/// (key + header, ~100 B) dominates and the dissertation measured losses.
pub const MIN_BLOCK_SIZE: u32 = 256;
pub const MIN_TIMEOUT_MS: u64 = 1;
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// A lease shorter than this would make every gateway re-read the config
/// from the authority several times per request burst.
pub const MIN_LEASE_MS: u64 = 50;
pub const MAX_LEASE_MS: u64 = 600_000;

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct OptionSpec {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub range: String,
    pub default: String,
    /// can be changed through PUT /api/v1/config
    pub settable: bool,
    pub description: &'static str,
}

/// Every option of a volume's cache configuration, in display order.
pub fn table() -> Vec<OptionSpec> {
    vec![
        OptionSpec {
            name: "block_size",
            ty: "bytes (power of two)",
            range: format!("{MIN_BLOCK_SIZE} ..= min(stripe unit, cache item limit)"),
            default: DEFAULT_BLOCK_SIZE.to_string(),
            settable: true,
            description: "size of the data blocks kept in the bank; must divide the stripe unit so a block \
                          never spans two storage servers",
        },
        OptionSpec {
            name: "placement",
            ty: "enum",
            range: "consistent | crc32 | modulo".into(),
            default: "consistent".into(),
            settable: true,
            description: "how keys map to cache nodes: ketama consistent hashing (a pool change moves ~1/M \
                          of the keys), crc32 mod M (the dissertation's default) or modulo (consecutive blocks \
                          of a file round-robin over nodes: throughput mode)",
        },
        OptionSpec {
            name: "timeout_ms",
            ty: "milliseconds",
            range: format!("{MIN_TIMEOUT_MS} ..= {MAX_TIMEOUT_MS}"),
            default: DEFAULT_BANK_TIMEOUT_MS.to_string(),
            settable: true,
            description: "a bank request slower than this counts as a miss",
        },
        OptionSpec {
            name: "lease_ms",
            ty: "milliseconds",
            range: format!("{MIN_LEASE_MS} ..= {MAX_LEASE_MS}"),
            default: DEFAULT_LEASE_MS.to_string(),
            settable: true,
            description: "gateways re-read the config at least this often; bounds how long a change takes \
                          to reach every gateway",
        },
        OptionSpec {
            name: "nodes",
            ty: "list of host:port",
            range: "reachable memcached-compatible nodes".into(),
            default: "[] (no cache)".into(),
            settable: true,
            description: "the cache-node pool; usually changed with POST/DELETE /api/v1/cache-nodes",
        },
        OptionSpec {
            name: "volume",
            ty: "string",
            range: "fixed at volume creation".into(),
            default: "vol0".into(),
            settable: false,
            description: "volume name, part of every cache key so several volumes can share a bank",
        },
        OptionSpec {
            name: "epoch",
            ty: "integer",
            range: "bumped by every change".into(),
            default: "1".into(),
            settable: false,
            description: "part of every cache key; a PUT may include the epoch it was based on \
                          (compare-and-set: 409 if the volume moved on)",
        },
    ]
}
