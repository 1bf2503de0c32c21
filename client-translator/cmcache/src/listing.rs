//! A listing with attributes (READDIRPLUS, the gateway's stat-ahead) from
//! the bank: the names from the storage servers, every entry and stat
//! from the bank.
//!
//! ```text
//!  readdir(D, plus) ─> names(D)            server 0 reads D's blocks, no inode
//!                  ─> get  d:D:<name> × n   the bank: each name's id
//!                  ─> get  s:<id> × n       the bank: each id's merged stat
//!                  ─> a few misses: lookup each (claims and fills the bank)
//!                     more: claim what was missing, the batch asked of the
//!                     servers as before, and the claims filled from it
//! ```
//!
//! A fill from a listing follows the claim rule of every populate: claimed
//! before the servers are asked, so a change in between deletes the claim
//! and the fill fails. SMCache counts a listing with attributes as a
//! getattr of each file it lists, so a later change of one sends its stat
//! delete again (`smcache::clean`).
//!
//! Listed the old way, a server opens every entry of the batch, and every
//! server but the first is asked for its copies' attributes (`getattrs`):
//! on a cold disk, one inode read per entry per server, though the bank may
//! hold every answer. This is the dissertation's case for the bank (B1: a
//! directory made by one client, stat'ed by the others).
//!
//! Coherent as a lookup of each name is: the names are the servers' at the
//! time of listing, and the bank's entries and stats are kept current by
//! the servers before they acknowledge a change (a name removed or
//! replaced since its listing is a miss or its new object, as a lookup
//! just after the listing would see).

use crate::translator::{cas, claim_of, stat_of, Claim, CmCache};
use cache_bank::value::{self, Kind};
use cache_bank::{CacheKey, Layout};
use xlator::*;

/// Misses in one batch answered by a lookup each; past this the batch is
/// asked of the servers whole (one request instead of many).
const MAX_LOOKUPS: usize = 8;

/// What the bank lacks for one listed name.
enum Lack {
    /// the entry (so the id too)
    Entry(CacheKey),
    /// the stat of the id the entry names
    Stat(FileId, CacheKey),
}

impl Lack {
    fn key(&self) -> &CacheKey {
        match self {
            Lack::Entry(k) | Lack::Stat(_, k) => k,
        }
    }
}

/// The listed name `n` with its attributes.
fn entry(n: &DirName, attr: Attr) -> DirEntry {
    DirEntry { name: n.name.clone(), kind: attr.kind, fid: attr.fid, next: n.next, attr: Some(attr) }
}

impl CmCache {
    /// `readdir(loc, cookie, max, plus = true)` with a bank in force.
    pub(crate) async fn listing(&self, l: &Layout, loc: &Loc, dir: FileId, cookie: u64, max: u32) -> FsResult<Vec<DirEntry>> {
        let names = match self.below.names(loc, cookie, max).await {
            Ok(n) => n,
            // a server without `names` (an older one): as before
            Err(FsError::ENOSYS) => return self.forwarded(l, loc, cookie, max, &[], &[]).await,
            Err(e) => return Err(e),
        };
        let dkeys: Vec<_> = names.iter().map(|n| l.keys.dentry(dir, &n.name)).collect();
        let got = l.bank.get_many(&dkeys, false).await;
        let ids: Vec<Option<FileId>> = names
            .iter()
            .zip(&dkeys)
            .zip(got)
            .map(|((n, k), h)| {
                let p = l.bank.codec().decode(Kind::Dentry, &k.key, &h?.value)?;
                value::parse_dentry(&p, &n.name).map(|(fid, _)| fid)
            })
            .collect();
        let skeys: Vec<_> = ids.iter().flatten().map(|&fid| l.keys.stat(fid)).collect();
        let mut stats = l.bank.get_many(&skeys, false).await.into_iter().zip(skeys);
        // (index of the name, what the bank lacks of it)
        let mut lacks = Vec::new();
        let mut entries: Vec<Option<DirEntry>> = vec![None; names.len()];
        for (i, (id, dkey)) in ids.iter().zip(dkeys).enumerate() {
            let Some(fid) = *id else {
                lacks.push((i, Lack::Entry(dkey)));
                continue;
            };
            let (h, skey) = stats.next().expect("a stat key per id");
            match h.and_then(|h| stat_of(l, &skey, &h.value, fid)) {
                Some(attr) => entries[i] = Some(entry(&names[i], attr)),
                None => lacks.push((i, Lack::Stat(fid, skey))),
            }
        }
        if lacks.len() > MAX_LOOKUPS {
            return self.forwarded(l, loc, cookie, max, &names, &lacks).await;
        }
        self.metrics.cache.with_label_values(&["listing", "hit"]).inc_by((names.len() - lacks.len()) as u64);
        // each lack alone: a lookup, or the stat of the id known (both claim and fill)
        let filled = futures::future::join_all(lacks.iter().map(|(i, lack)| {
            let name = &names[*i].name;
            async move {
                match lack {
                    Lack::Entry(_) => self.lookup(loc, name).await,
                    Lack::Stat(fid, _) => {
                        let mut child = loc.child(name);
                        child.fid = Some(*fid);
                        self.stat(l, &child, *fid).await
                    }
                }
            }
        }))
        .await;
        for ((i, _), a) in lacks.iter().zip(filled) {
            self.metrics.count("listing", "miss");
            match a {
                Ok(attr) => entries[*i] = Some(entry(&names[*i], attr)),
                // removed since it was listed
                Err(FsError::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        let entries: Vec<DirEntry> = entries.into_iter().flatten().collect();
        if entries.is_empty() && !names.is_empty() {
            // every name went away since: an empty batch would end the
            // listing, so let the servers list on past them
            return self.forwarded(l, loc, cookie, max, &[], &[]).await;
        }
        Ok(entries)
    }

    /// The batch asked of the servers, as without a bank; what the bank
    /// lacked of it (`lacks`, indices into `names`) is claimed first and
    /// filled from the answer, so the next listing finds it. A change
    /// between the claim and the fill deletes the claim, and the fill
    /// fails: as for a lookup's.
    async fn forwarded(
        &self,
        l: &Layout,
        loc: &Loc,
        cookie: u64,
        max: u32,
        names: &[DirName],
        lacks: &[(usize, Lack)],
    ) -> FsResult<Vec<DirEntry>> {
        let keys: Vec<CacheKey> = lacks.iter().map(|(_, lack)| lack.key().clone()).collect();
        let claims = if keys.is_empty() { Vec::new() } else { l.bank.claim_many(&keys, l.bank.codec().placeholder()).await };
        let entries = self.below.readdir(loc, cookie, max, true).await?;
        self.metrics.cache.with_label_values(&["listing", "miss"]).inc_by(entries.len() as u64);
        let listed: std::collections::HashMap<&str, &DirEntry> = entries.iter().map(|e| (e.name.as_str(), e)).collect();
        let mut ups = Vec::new();
        for (((i, lack), key), got) in lacks.iter().zip(keys).zip(claims) {
            let (Claim::Mine(c), Some(e)) = (claim_of(l, got), listed.get(names[*i].name.as_str())) else { continue };
            match lack {
                Lack::Entry(_) => ups.push(cas(l, key, Kind::Dentry, &value::dentry_payload(e.fid, e.kind, &e.name), c)),
                Lack::Stat(fid, _) => {
                    if let Some(a) = e.attr.as_ref().filter(|a| a.fid == *fid) {
                        ups.push(cas(l, key, Kind::Stat, &value::attr_payload(a), c));
                    }
                }
            }
        }
        if !ups.is_empty() {
            let _ = l.bank.update(&ups, None).await;
        }
        Ok(entries)
    }
}
