//! Creates populate the bank: a new name's entry and the new object's stat
//! go into the bank from the create's own reply, so another gateway's first
//! lookup and stat of a file just created are answered by the bank.
//!
//! The same claim / ask / `cas` protocol as a lookup's populate, with the
//! claim taken *before* the create is sent (the new object's id is drawn
//! here, so its stat key is known in advance):
//!
//! 1. claim `dentry(parent, name)` and `stat(new id)` with placeholders;
//! 2. create on the storage servers. SMCache does not delete these two keys
//!    for a create (no value can be there, only placeholders), so our claim
//!    survives our own create;
//! 3. `cas` the merged reply in.
//!
//! Race-free for the reason the lookup's populate is: any later mutation
//! of the name or the object deletes the key after its disk operation, and
//! it can only start once the object exists, which is after our claim was
//! confirmed; so it either breaks our claim (the `cas` fails) or finds our
//! value and deletes it. A lookup elsewhere that claimed first stores what
//! it read from storage after its claim: right as well; then our `cas`
//! fails, which is fine. A failed create leaves placeholders, which are
//! misses and expire.
//!
//! The cost is one bank round trip before the create, when a bank is in
//! force; the `cas` is sent after the create is answered (step 3 cannot
//! store anything stale however late it lands).

use crate::translator::{cas, claim_of, Claim};
use crate::CmCache;
use cache_bank::value::{self, Kind};
use cache_bank::{CacheKey, Layout, Update};
use std::sync::Arc;
use xlator::{Attr, FileId, Loc};

/// What a create claimed before it was sent.
pub(crate) struct Claimed {
    l: Arc<Layout>,
    parent: FileId,
    name: String,
    entry: (CacheKey, Option<u64>),
    /// the new object's stat: its id, key and placeholder's CAS
    stat: Option<(FileId, CacheKey, Option<u64>)>,
}

fn mine(l: &Layout, h: Option<cache_bank::Hit>) -> Option<u64> {
    match claim_of(l, h) {
        Claim::Mine(c) => Some(c),
        Claim::Value(_) | Claim::Nothing => None,
    }
}

impl CmCache {
    /// Claim the entry `name` in `parent` and, for a new object, the stat
    /// of id `new` (None for a link, whose object exists and changes).
    pub(crate) async fn claim_new(&self, parent: &Loc, name: &str, new: Option<FileId>) -> Option<Claimed> {
        let (l, pfid) = (self.layout()?, parent.fid?);
        let mut keys = vec![l.keys.dentry(pfid, name)];
        keys.extend(new.map(|f| l.keys.stat(f)));
        let got = l.bank.claim_many(&keys, l.bank.codec().placeholder()).await;
        let mut got = got.into_iter();
        let entry_cas = mine(&l, got.next().flatten());
        let stat_cas = mine(&l, got.next().flatten());
        let mut keys = keys.into_iter();
        let entry = (keys.next()?, entry_cas);
        let stat = new.and_then(|f| Some((f, keys.next()?, stat_cas)));
        Some(Claimed { l, parent: pfid, name: name.to_string(), entry, stat })
    }

    /// Fill what was claimed from the create's merged reply `a`.
    pub(crate) fn populate_new(&self, c: Option<Claimed>, a: &Attr) {
        let Some(c) = c else { return };
        self.remember(c.parent, &c.name, a.fid);
        let l = &c.l;
        let mut ups: Vec<Update> = Vec::with_capacity(2);
        if let (key, Some(cv)) = c.entry {
            ups.push(cas(l, key, Kind::Dentry, &value::dentry_payload(a.fid, a.kind, &c.name), cv));
        }
        // A non-exclusive create that found the name taken answers with the
        // existing file: its stat was not claimed.
        if let Some((fid, key, Some(cv))) = c.stat {
            if fid == a.fid {
                ups.push(cas(l, key, Kind::Stat, &value::attr_payload(a), cv));
            }
        }
        if ups.is_empty() {
            return;
        }
        // Off the reply path: the `cas` only lands if nothing touched the
        // keys since our claim (any mutation deletes them), however late it
        // comes, so the create need not wait for it.
        let counted = self.metrics.cache.with_label_values(&["create", "populate"]);
        let l = c.l.clone();
        tokio::spawn(async move {
            let n = ups.len() as u64;
            let _ = l.bank.update(&ups, None).await;
            counted.inc_by(n);
        });
    }
}
