//! The CMCache translator: docs/design.md §4 (stat, read, write and the other mutations), gateway side.

use crate::cold_reads::ColdReads;
use crate::dirs_changed_here::DirsChangedHere;
use crate::metrics;
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use cache_bank::value::{self, Kind};
use cache_bank::{BankOptions, CacheKey, Hit, Layout, LayoutSlot, Update};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use volume::CacheConfig;
use xlator::*;

/// What the gateway holds: the config under a lease, or `None` (bypass).
pub type HeldConfig = Option<Arc<CacheConfig>>;

const MAX_HINTS: usize = 200_000;

pub struct CmCache {
    pub(crate) below: Next,
    config: watch::Receiver<HeldConfig>,
    layout: LayoutSlot,
    /// (parent, name) -> the child's id last seen: lets a lookup fetch the
    /// entry and the child's stat in one round trip. Only a guess: the
    /// entry fetched with it decides.
    hints: Mutex<HashMap<(FileId, String), FileId>>,
    /// read timeout override (tests on a loaded machine); None = config's
    timeout: Option<Duration>,
    /// the stripe unit below, when known: blocks are read from the bank only
    /// if the block size divides it (else a block would span two servers,
    /// and no single server could keep it fresh)
    stripe_unit: Option<u64>,
    /// directories changed through here lately: their stat skips the bank
    changing: DirsChangedHere,
    /// files read forward past a miss lately: their reads skip the bank
    cold: ColdReads,
    pub(crate) metrics: metrics::Metrics,
}

impl CmCache {
    /// `bank`: the options every bank built from the config gets (the
    /// daemon's transport and bank metrics); CMCache's own metrics are
    /// registered in `registry` (the gateway's).
    pub fn new(
        below: Next,
        config: watch::Receiver<HeldConfig>,
        bank: BankOptions,
        registry: &prometheus::Registry,
    ) -> CmCache {
        CmCache {
            below,
            config,
            layout: LayoutSlot::new(bank),
            hints: Mutex::new(HashMap::new()),
            timeout: None,
            stripe_unit: None,
            changing: DirsChangedHere::default(),
            cold: ColdReads::default(),
            metrics: metrics::Metrics::register(registry),
        }
    }

    /// What this CMCache counted (tests read hits from here).
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.metrics
    }

    /// The stripe unit of the translator below (see the field).
    pub fn with_stripe_unit(mut self, unit: u64) -> CmCache {
        self.stripe_unit = Some(unit);
        self
    }

    /// Use this bank read timeout instead of the volume's `timeout_ms`.
    pub fn with_timeout(mut self, t: Duration) -> CmCache {
        self.timeout = Some(t);
        self
    }

    /// The layout of the config held (`None`: no lease, or no usable
    /// config: bypass the bank). Built by cache-bank, as SMCache's is.
    pub(crate) fn layout(&self) -> Option<Arc<Layout>> {
        let held = self.config.borrow().clone()?;
        self.layout.follow(&held, self.timeout, |_| {})
    }

    fn hint(&self, parent: FileId, name: &str) -> Option<FileId> {
        self.hints.lock().unwrap().get(&(parent, name.to_string())).copied()
    }

    pub(crate) fn remember(&self, parent: FileId, name: &str, child: FileId) {
        let mut h = self.hints.lock().unwrap();
        if h.len() >= MAX_HINTS {
            h.clear();
        }
        h.insert((parent, name.to_string()), child);
    }

    fn forget(&self, parent: Option<FileId>, name: &str) {
        if let Some(p) = parent {
            self.hints.lock().unwrap().remove(&(p, name.to_string()));
        }
    }
}

/// A claimed key: either someone's real value, or our placeholder's CAS.
pub(crate) enum Claim {
    Value(Bytes),
    Mine(u64),
    Nothing,
}

pub(crate) fn claim_of(l: &Layout, h: Option<Hit>) -> Claim {
    match h {
        Some(h) if l.bank.codec().is_placeholder(&h.value) => match h.cas {
            Some(c) => Claim::Mine(c),
            None => Claim::Nothing,
        },
        Some(h) => Claim::Value(h.value),
        None => Claim::Nothing,
    }
}

/// A cached stat, if it checks (a forged or foreign value is a miss,
/// counted by the bank's codec).
pub(crate) fn stat_of(l: &Layout, key: &CacheKey, v: &Bytes, fid: FileId) -> Option<Attr> {
    l.bank.codec().decode(Kind::Stat, &key.key, v).and_then(|p| value::parse_attr(&p)).filter(|a| a.fid == fid)
}

pub(crate) fn cas(l: &Layout, key: CacheKey, kind: Kind, payload: &[u8], c: u64) -> Update {
    let v = l.bank.codec().encode(kind, &key.key, payload);
    Update::Cas(key, v, c)
}

impl CmCache {
    /// A file's merged stat from the bank, or from the storage servers with
    /// a claimed populate (claim, read storage, cas — a mutation's delete in
    /// between breaks the claim, so no stale stat can land).
    pub(crate) async fn stat(&self, l: &Layout, loc: &Loc, fid: FileId) -> FsResult<Attr> {
        let key = l.keys.stat(fid);
        let got = l.bank.claim_many(std::slice::from_ref(&key), l.bank.codec().placeholder()).await;
        self.stat_claimed(l, loc, fid, key, got.into_iter().next().flatten()).await
    }

    /// [`CmCache::stat`] once its key was claimed (`got`: what the claim
    /// found), in this call or in a batch with other keys.
    async fn stat_claimed(&self, l: &Layout, loc: &Loc, fid: FileId, key: CacheKey, got: Option<Hit>) -> FsResult<Attr> {
        let c = match claim_of(l, got) {
            Claim::Value(v) => {
                if let Some(a) = stat_of(l, &key, &v, fid) {
                    self.metrics.count("getattr", "hit");
                    return Ok(a);
                }
                // corrupt or foreign: a miss, and out of the way (deleting is always safe)
                let _ = l.bank.update(&[Update::Delete(key.clone())], None).await;
                None
            }
            Claim::Mine(c) => Some(c),
            Claim::Nothing => None,
        };
        self.metrics.count("getattr", "miss");
        let a = self.below.getattr(loc).await?;
        if let (Some(c), true) = (c, a.fid == fid) {
            let _ = l.bank.update(&[cas(l, key, Kind::Stat, &value::attr_payload(&a), c)], None).await;
        }
        Ok(a)
    }
}

/// Every mutation is placed ([`Stateful`]): the namespace ones claim the
/// new names' keys or forget this gateway's hints; the data ones pass on
/// untouched, because the storage servers' SMCache fixes the bank before
/// they acknowledge, and CMCache keeps nothing of a file's data itself.
#[async_trait]
impl Stateful for CmCache {
    fn name(&self) -> &str {
        "cmcache"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    /// Entry and (guessed) child stat in one round trip; a miss forwards the
    /// lookup and populates the entry through a claim.
    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        let (Some(l), Some(pfid)) = (self.layout(), parent.fid) else {
            self.metrics.count("lookup", "bypass");
            return self.below.lookup(parent, name).await;
        };
        let dkey = l.keys.dentry(pfid, name);
        let hint = self.hint(pfid, name);
        let mut keys = vec![dkey.clone()];
        if let Some(h) = hint {
            keys.push(l.keys.stat(h));
        }
        let got = l.bank.claim_many(&keys, l.bank.codec().placeholder()).await;
        let mut got = got.into_iter();
        let dentry = claim_of(&l, got.next().flatten());
        let hinted = got.next().flatten();
        let dclaim = match dentry {
            Claim::Value(v) => match l.bank.codec().decode(Kind::Dentry, &dkey.key, &v).and_then(|p| value::parse_dentry(&p, name)) {
                Some((fid, _kind)) => {
                    // the entry is known: the stat comes with it (hint) or next
                    self.metrics.count("lookup", "hit");
                    let loc = parent.child(name).with_fid(fid);
                    if hint == Some(fid) {
                        // claimed with the entry: a value, or ours to fill
                        // (a file written since its stat was stored)
                        return self.stat_claimed(&l, &loc, fid, keys[1].clone(), hinted).await;
                    }
                    self.remember(pfid, name, fid);
                    return self.stat(&l, &loc, fid).await;
                }
                None => None,
            },
            Claim::Mine(c) => Some(c),
            Claim::Nothing => None,
        };
        self.metrics.count("lookup", "miss");
        let a = self.below.lookup(parent, name).await?;
        self.remember(pfid, name, a.fid);
        let mut ups = Vec::new();
        if let Some(c) = dclaim {
            ups.push(cas(&l, dkey, Kind::Dentry, &value::dentry_payload(a.fid, a.kind, name), c));
        }
        if let (Some(h), Some(hit)) = (hint, hinted) {
            if h == a.fid && l.bank.codec().is_placeholder(&hit.value) {
                if let Some(c) = hit.cas {
                    ups.push(cas(&l, keys[1].clone(), Kind::Stat, &value::attr_payload(&a), c));
                }
            }
        }
        if !ups.is_empty() {
            let _ = l.bank.update(&ups, None).await;
        }
        Ok(a)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        let (Some(l), Some(fid)) = (self.layout(), loc.fid) else {
            self.metrics.count("getattr", "bypass");
            return self.below.getattr(loc).await;
        };
        if self.changing.take(fid) {
            self.metrics.count("getattr", "changing");
            return self.below.getattr(loc).await;
        }
        self.stat(&l, loc, fid).await
    }

    /// With attributes and a bank: the names from the servers, the rest
    /// from the bank (module `listing`).
    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        match (plus, self.layout(), loc.fid) {
            (true, Some(l), Some(dir)) => self.listing(&l, loc, dir, cookie, max).await,
            _ => self.below.readdir(loc, cookie, max, plus).await,
        }
    }

    /// Every covering block in one round trip (with the stat, needed only
    /// when a short block leaves the end of file in question); all present
    /// → assembled here; any missing → forwarded (the owning storage server
    /// populates the blocks as it answers).
    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        let (Some(l), Some(fid)) = (self.layout(), loc.fid) else {
            self.metrics.count("read", "bypass");
            return self.below.read(loc, offset, size).await;
        };
        let bs = l.keys.block_size as u64;
        if self.stripe_unit.is_some_and(|u| u % bs != 0) {
            self.metrics.count("read", "bypass");
            return self.below.read(loc, offset, size).await;
        }
        let Some((first, last)) = l.keys.covering(offset, size as u64) else {
            return self.below.read(loc, offset, size).await;
        };
        if self.cold.skip(fid, offset, size) {
            self.metrics.count("read", "cold");
            let d = self.below.read(loc, offset, size).await?;
            self.metrics.read_bytes.with_label_values(&["storage"]).inc_by(d.len() as u64);
            return Ok(d);
        }
        let skey = l.keys.stat(fid);
        let mut keys = Vec::with_capacity((last - first + 2) as usize);
        keys.push(skey.clone());
        keys.extend((first..=last).map(|n| l.keys.block(fid, n)));
        let got = l.bank.get_many(&keys, false).await;
        let mut blocks = Vec::with_capacity(keys.len() - 1);
        for (k, h) in keys[1..].iter().zip(&got[1..]) {
            match h.as_ref().and_then(|h| l.bank.codec().decode(Kind::Block, &k.key, &h.value)) {
                Some(p) if p.len() as u64 <= bs => blocks.push(p),
                _ => {
                    if h.is_some() {
                        // refused (forged, corrupt, foreign): out of the way, so the
                        // server's populate (an add) can land (deleting is always safe)
                        let _ = l.bank.update(&[Update::Delete(k.clone())], None).await;
                    }
                    self.metrics.count("read", "miss");
                    self.cold.missed(fid, offset, size);
                    let d = self.below.read(loc, offset, size).await?;
                    self.metrics.read_bytes.with_label_values(&["storage"]).inc_by(d.len() as u64);
                    return Ok(d);
                }
            }
        }
        let end = offset + size as u64;
        let eof = if blocks.iter().all(|b| b.len() as u64 == bs) {
            end
        } else {
            let size = match got[0].as_ref().and_then(|h| stat_of(&l, &skey, &h.value, fid)) {
                Some(a) => a.size,
                None => self.stat(&l, loc, fid).await?.size,
            };
            size.min(end)
        };
        if eof <= offset {
            self.metrics.count("read", "hit");
            return Ok(Bytes::new());
        }
        // one block answers a small read without a copy
        if first == last && (blocks[0].len() as u64) >= eof - first * bs {
            let s = (offset - first * bs) as usize;
            self.metrics.count("read", "hit");
            self.metrics.read_bytes.with_label_values(&["bank"]).inc_by(eof - offset);
            return Ok(blocks[0].slice(s..s + (eof - offset) as usize));
        }
        let mut out = BytesMut::with_capacity((eof - offset) as usize);
        for (i, b) in blocks.iter().enumerate() {
            let bstart = (first + i as u64) * bs;
            let (s, e) = (offset.max(bstart), eof.min(bstart + bs));
            if s >= e {
                continue;
            }
            let (rs, re) = ((s - bstart) as usize, (e - bstart) as usize);
            let have = b.len().min(re);
            if rs < have {
                out.extend_from_slice(&b[rs..have]);
            }
            // past a block's valid length, inside the file: a hole
            out.resize(out.len() + (re - have.max(rs)), 0);
        }
        self.metrics.count("read", "hit");
        self.metrics.read_bytes.with_label_values(&["bank"]).inc_by(out.len() as u64);
        Ok(out.freeze())
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        self.changing.touched(parent.fid);
        let c = self.claim_new(parent, &new.name, Some(new.fid)).await;
        let a = self.below.mknod(parent, new, mode, rdev).await?;
        self.populate_new(c, &a.attr);
        Ok(a)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        self.changing.touched(parent.fid);
        let c = self.claim_new(parent, &new.name, Some(new.fid)).await;
        let a = self.below.mkdir(parent, new).await?;
        self.populate_new(c, &a.attr);
        Ok(a)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        self.changing.touched(parent.fid);
        let c = self.claim_new(parent, &new.name, Some(new.fid)).await;
        let a = self.below.symlink(parent, new, target).await?;
        self.populate_new(c, &a.attr);
        Ok(a)
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        self.changing.touched(parent.fid);
        // An O_TRUNC create of an existing file is a mutation the servers
        // invalidate for: nothing to populate then (the claims just fail).
        let c = self.claim_new(parent, &new.name, Some(new.fid)).await;
        let a = self.below.create(parent, new, flags).await?;
        self.populate_new(c, &a.attr);
        Ok(a)
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        self.changing.touched(newparent.fid);
        // The file's own stat changes (nlink): only the new entry is filled.
        let c = self.claim_new(newparent, newname, None).await;
        let a = self.below.link(loc, newparent, newname).await?;
        self.populate_new(c, &a.attr);
        Ok(a)
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        self.below.setattr(loc, set).await
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.below.open(loc, flags).await
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        self.below.write(loc, offset, data).await
    }

    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        self.below.fallocate(loc, mode, ranges).await
    }

    /// The bank is the servers' to keep coherent (SMCache, as for a write).
    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        self.below.copy_range(src, dst, ranges).await
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.below.setxattr(loc, name, value, flags).await
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.below.removexattr(loc, name).await
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.forget(parent.fid, name);
        self.changing.touched(parent.fid);
        self.below.unlink(parent, name).await
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.forget(parent.fid, name);
        self.changing.touched(parent.fid);
        self.below.rmdir(parent, name).await
    }

    async fn rename(
        &self,
        parent: &Loc,
        name: &str,
        newparent: &Loc,
        newname: &str,
        flags: RenameFlags,
    ) -> FsResult<Renamed> {
        self.forget(parent.fid, name);
        self.forget(newparent.fid, newname);
        self.changing.touched(parent.fid);
        self.changing.touched(newparent.fid);
        self.below.rename(parent, name, newparent, newname, flags).await
    }
}

trait WithFid {
    fn with_fid(self, fid: FileId) -> Loc;
}

impl WithFid for Loc {
    fn with_fid(mut self, fid: FileId) -> Loc {
        self.fid = Some(fid);
        self
    }
}
