//! A listing with attributes (READDIRPLUS, the gateway's stat-ahead) from
//! the bank: the names from the storage servers, every entry and stat
//! from the bank.
//!
//! ```text
//!  readdir(D, plus) ─> names(D)            server 0 reads D's blocks, no inode
//!                  ─> get  d:D:<name> × n   the bank: each name's id
//!                  ─> get  s:<id> × n       the bank: each id's merged stat
//!                  ─> a few misses: lookup each (claims and fills the bank)
//!                     more: the batch asked of the servers as before
//! ```
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

use crate::translator::{stat_of, CmCache};
use cache_bank::value::{self, Kind};
use cache_bank::Layout;
use xlator::*;

/// Misses in one batch answered by a lookup each; past this the batch is
/// asked of the servers whole (one request instead of many).
const MAX_LOOKUPS: usize = 8;

impl CmCache {
    /// `readdir(loc, cookie, max, plus = true)` with a bank in force.
    pub(crate) async fn listing(&self, l: &Layout, loc: &Loc, dir: FileId, cookie: u64, max: u32) -> FsResult<Vec<DirEntry>> {
        let names = match self.below.names(loc, cookie, max).await {
            Ok(n) => n,
            // a server without `names` (an older one): as before
            Err(FsError::ENOSYS) => return self.forwarded(loc, cookie, max).await,
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
        let mut entries: Vec<Option<DirEntry>> = names
            .iter()
            .zip(&ids)
            .map(|(n, id)| {
                let fid = (*id)?;
                let (h, key) = stats.next()?;
                let attr = stat_of(l, &key, &h?.value, fid)?;
                Some(DirEntry { name: n.name.clone(), kind: attr.kind, fid, next: n.next, attr: Some(attr) })
            })
            .collect();
        let missed: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].is_none()).collect();
        if missed.len() > MAX_LOOKUPS {
            return self.forwarded(loc, cookie, max).await;
        }
        self.metrics.cache.with_label_values(&["listing", "hit"]).inc_by((entries.len() - missed.len()) as u64);
        let looked = futures::future::join_all(missed.iter().map(|&i| self.lookup(loc, &names[i].name))).await;
        for (&i, a) in missed.iter().zip(looked) {
            self.metrics.count("listing", "miss");
            match a {
                Ok(attr) => {
                    let n = &names[i];
                    entries[i] = Some(DirEntry { name: n.name.clone(), kind: attr.kind, fid: attr.fid, next: n.next, attr: Some(attr) })
                }
                // removed since it was listed
                Err(FsError::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        let entries: Vec<DirEntry> = entries.into_iter().flatten().collect();
        if entries.is_empty() && !names.is_empty() {
            // every name went away since: an empty batch would end the
            // listing, so let the servers list on past them
            return self.forwarded(loc, cookie, max).await;
        }
        Ok(entries)
    }

    /// The batch asked of the servers, as without a bank.
    async fn forwarded(&self, loc: &Loc, cookie: u64, max: u32) -> FsResult<Vec<DirEntry>> {
        let entries = self.below.readdir(loc, cookie, max, true).await?;
        self.metrics.cache.with_label_values(&["listing", "miss"]).inc_by(entries.len() as u64);
        Ok(entries)
    }
}
