//! What a storage operation changes in the bank, independent of the key
//! layout (so the same change can be applied to the current epoch's keys
//! and, as deletions, to the previous epoch's).

use bytes::Bytes;
use cache_bank::value::Kind;
use cache_bank::{CacheKey, Codec, Keys, Update};
use xlator::FileId;

#[derive(Clone, Debug)]
pub enum K {
    Stat(FileId),
    Dentry(FileId, String),
    /// block `n` in the current layout's block size
    Block(FileId, u64),
}

#[derive(Clone, Debug)]
pub enum Change {
    /// store a block's payload; `add` = only if absent (a populate)
    Put { k: K, payload: Bytes, add: bool },
    Del(K),
}

impl K {
    fn key(&self, keys: &Keys) -> CacheKey {
        match self {
            K::Stat(f) => keys.stat(*f),
            K::Dentry(p, n) => keys.dentry(*p, n),
            K::Block(f, n) => keys.block(*f, *n),
        }
    }
}

fn kind_of(k: &K) -> Kind {
    match k {
        K::Stat(_) => Kind::Stat,
        K::Dentry(..) => Kind::Dentry,
        K::Block(..) => Kind::Block,
    }
}

/// The updates for `changes` under `keys`, values framed by `codec` (the
/// bank's: MAC-checked, maybe encrypted).
pub fn updates(changes: &[Change], keys: &Keys, codec: &Codec) -> Vec<Update> {
    changes
        .iter()
        .map(|c| match c {
            Change::Put { k, payload, add } => {
                let key = k.key(keys);
                let v = codec.encode(kind_of(k), &key.key, payload);
                if *add {
                    Update::Add(key, v)
                } else {
                    Update::Set(key, v)
                }
            }
            Change::Del(k) => Update::Delete(k.key(keys)),
        })
        .collect()
}

/// The same changes as deletions of `prev`'s keys (a block maps to every
/// block of `prev`'s size that overlaps it).
pub fn previous_deletes(changes: &[Change], cur: &Keys, prev: &Keys) -> Vec<Update> {
    let mut out = Vec::new();
    for c in changes {
        let k = match c {
            Change::Put { k, add: false, .. } | Change::Del(k) => k,
            Change::Put { add: true, .. } => continue,
        };
        match k {
            K::Block(f, n) => {
                let bs = cur.block_size as u64;
                if let Some((a, b)) = prev.covering(n * bs, bs) {
                    out.extend((a..=b).map(|m| Update::Delete(prev.block(*f, m))));
                }
            }
            other => out.push(Update::Delete(other.key(prev))),
        }
    }
    out
}
