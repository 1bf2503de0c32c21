//! What the cluster imposes on a cache config beyond the options table:
//! the gateways' stripe unit and the nodes' item limit, each unknown to
//! some checkers. The options' rules (`options.rs`) read them; `validate`
//! hands them over.

use serde::{Deserialize, Serialize};

/// memcached's default item size limit (`-I 1m`).
pub const DEFAULT_ITEM_LIMIT: u32 = 1024 * 1024;
/// Room a block item needs beyond its data: the key (≤ 250 B), the value
/// header (valid length, checksum) and memcached's own item header.
pub const DEFAULT_VALUE_OVERHEAD: u32 = 512;
/// The stripe unit when the gateway does not say otherwise (DESIGN.md).
pub const DEFAULT_STRIPE_UNIT: u32 = 128 * 1024;

/// What the cluster imposes on a config beyond the options table; `None`
/// where the checker cannot know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// the stripe translator's unit; block_size must divide it
    pub stripe_unit: Option<u32>,
    /// largest item a cache node stores (memcached `-I`)
    pub item_limit: Option<u32>,
    /// bytes of an item that are not block data
    pub value_overhead: u32,
}

impl Limits {
    /// What a storage server knows: nothing of the gateways' stripe unit
    /// nor of the nodes' item limit. A change checked by a gateway against
    /// the real limits must not be refused here.
    pub const UNKNOWN: Limits = Limits { stripe_unit: None, item_limit: None, value_overhead: DEFAULT_VALUE_OVERHEAD };
}

impl Default for Limits {
    /// A gateway with the default stripe unit over default memcached nodes.
    fn default() -> Self {
        Limits {
            stripe_unit: Some(DEFAULT_STRIPE_UNIT),
            item_limit: Some(DEFAULT_ITEM_LIMIT),
            value_overhead: DEFAULT_VALUE_OVERHEAD,
        }
    }
}
