//! One stored item: its value, memcached's metadata, and what the LRU needs
//! to know of it; and what it is charged against `-m` (memcached's
//! `ITEM_ntotal`). The shard tables (`table.rs`) hold items, the store
//! (`store.rs`) counts and evicts them, `watch` logs their sizes.

/// Per-item bytes charged against `-m` besides key and value: exactly
/// memcached's `ITEM_ntotal` (a 48-byte item header, the key's NUL, the
/// value's "\r\n" and the 8-byte CAS), so `stats bytes` and `me`'s `size`
/// read as memcached's for the same items. (What `-m` is charged is that
/// rounded up to the item's slab chunk: [`Classes::charge`](crate::slabs::Classes::charge).)
pub const ITEM_OVERHEAD: usize = 48 + 1 + 2 + 8;

/// An item's value. The refcount sits in the same allocation, just before
/// the bytes: a multi-get pins a value for its `writev` (`out.rs`) by
/// touching the value's first cache line, which the kernel reads next
/// anyway. (A cloned `bytes::Bytes` keeps its count in a separate block:
/// one more cache miss per key, 12 % of a 64-key multi-get's CPU.)
pub type Value = std::sync::Arc<[u8]>;

#[derive(Clone, Debug)]
pub struct Item {
    pub value: Value,
    pub flags: u32,
    /// server time; 0 = never
    pub exptime: u32,
    /// server time of the last store (for flush_all with delay)
    pub time: u32,
    /// server time of the last access
    pub atime: u32,
    pub cas: u64,
    pub fetched: bool,
    /// stored by a meta command with a base64 key (`ms ... b`): memcached's
    /// `ITEM_KEY_BINARY`, the key is shown base64-encoded wherever it is returned
    pub binary_key: bool,
    /// meta: invalidated (md I / ms I), and whether a win token was handed out
    pub stale: bool,
    pub win_sent: bool,
    /// store-wide access order, compared across shards when evicting
    pub tick: u64,
    /// server time of the last move to the LRU head
    pub(crate) bumped: u32,
    /// read since that move (rescued instead of evicted at the tail)
    pub(crate) active: bool,
}

impl Item {
    pub fn new(value: Value, flags: u32, exptime: u32, now: u32, cas: u64) -> Item {
        Item { value, flags, exptime, time: now, atime: now, cas, fetched: false, binary_key: false, stale: false, win_sent: false, tick: 0, bumped: now, active: false }
    }
}

pub(crate) fn ntotal(key_len: usize, item: &Item) -> usize {
    item_ntotal(key_len, item.value.len())
}

/// memcached's `ITEM_ntotal` of an item: what it is charged.
pub fn item_ntotal(key_len: usize, value_len: usize) -> usize {
    key_len + value_len + ITEM_OVERHEAD
}

/// Why a lookup found no live item although one was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dead {
    Expired,
    /// by `flush_all` with a delay (an immediate one drops everything)
    Flushed,
}

/// Whether a tail item was read late enough in its time on the list to be
/// moved back to the head instead of evicted: read since its last bump, and
/// in the second half of the time since. A rescue makes an item look as
/// recent as a new one; one read long ago (by a load that has moved on)
/// must not buy that, or such items push out the ones being read now
/// (issue 14: after a load that read everything, memcaslap missed the keys
/// it was reading while the old ones cycled back to the head). memcached
/// gets the same from its warm LRU, which keeps active items only until
/// newer active ones push them to cold.
pub(crate) fn read_lately(it: &Item, now: u32) -> bool {
    it.active && 2 * u64::from(it.atime.wrapping_sub(it.bumped)) >= u64::from(now.wrapping_sub(it.bumped))
}

