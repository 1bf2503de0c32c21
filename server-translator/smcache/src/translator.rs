//! The SMCache translator: docs/design.md §4 (stat, read, write and the other mutations), server side.
//!
//! A [`Stateful`] translator: each data and namespace operation of the op
//! table is placed here (there is no pass-through default for a mutation),
//! so an operation added to the table does not compile until it says what
//! it changes in the bank. With no cache nodes in the volume config every
//! call passes down: there is no bank to keep.

use crate::bank_changes::{self, Change, K};
use crate::known_empty::KnownEmpty;
use crate::never_cached::NeverCached;
use crate::file_order::FileOrder;
use crate::metrics;
use crate::layouts::{Layout, Layouts};
use async_trait::async_trait;
use bytes::Bytes;
use cache_bank::BankError;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use volume::{CacheConfig, FenceRequests};
use xlator::*;

mod fallocate;

/// How long a mutation waits for a cache node to confirm its changes before
/// asking for the node to be fenced. Deadline + fencing (about one lease to
/// be noticed, one to be outwaited) stays below the gateways' storage RPC
/// timeout of 10 s.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);

/// Largest aligned read SMCache widens a request to (bigger reads pass
/// through unpopulated).
const MAX_POPULATE: u64 = 8 << 20;

#[derive(Clone, Debug)]
pub struct SmOptions {
    /// the dissertation's "threaded" mode: a write deletes the blocks it
    /// covers before replying and rewrites them afterwards, off the reply path
    pub threaded: bool,
    pub deadline: Duration,
    /// what every bank built from the volume config gets (the daemon's
    /// transport and bank metrics); the timeout comes from the config
    pub bank: cache_bank::BankOptions,
}

impl Default for SmOptions {
    fn default() -> Self {
        SmOptions { threaded: false, deadline: DEFAULT_DEADLINE, bank: Default::default() }
    }
}

pub struct SmCache {
    inner: Arc<Inner>,
    below: Next,
}

struct Inner {
    below: Next,
    layouts: Layouts,
    /// per file: populates shared, writes exclusive
    order: FileOrder,
    /// stat keys known to hold nothing (deletes that may be skipped)
    known_empty: KnownEmpty,
    /// files whose blocks were never stored (writes need not rewrite them)
    never_cached: NeverCached,
    opts: SmOptions,
    /// nodes we want fenced, read by gateways with the volume config
    fences: Arc<FenceRequests>,
    metrics: metrics::Metrics,
}

impl SmCache {
    /// SMCache over `below`, as a node of the graph ([`InGraph`]; the
    /// translator itself is `.inner()`). Its metrics are registered in
    /// `registry` (the storage server's).
    pub fn new(
        below: Next,
        config: watch::Receiver<CacheConfig>,
        fences: Arc<FenceRequests>,
        opts: SmOptions,
        registry: &prometheus::Registry,
    ) -> InGraph<SmCache> {
        let layouts = Layouts::new(config, opts.bank.clone());
        let metrics = metrics::Metrics::register(registry);
        let inner = Arc::new(Inner {
            below: below.clone(),
            layouts,
            order: FileOrder::default(),
            known_empty: KnownEmpty::default(),
            never_cached: NeverCached::default(),
            opts,
            fences,
            metrics,
        });
        InGraph::new(Arc::new(SmCache { inner, below }))
    }

    /// What this SMCache counted.
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.inner.metrics
    }
}

fn is_trunc(flags: i32) -> bool {
    flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
}

impl Inner {
    async fn fid_of(&self, loc: &Loc) -> FsResult<FileId> {
        match loc.fid {
            Some(f) => Ok(f),
            None => Ok(self.below.getattr(loc).await?.fid),
        }
    }

    /// Apply `changes` and wait until the bank confirms them (or proves the
    /// node holding them empty). Only then may the mutation be answered.
    ///
    /// A node that cannot confirm before the deadline (frozen, partitioned)
    /// is not waited for forever and does not turn the mutation into an
    /// error: we ask the gateways to fence it (move it out of the pool under
    /// a new epoch, see `volume::lease`), wait until that config is in force
    /// here, and then until the replaced epoch's lease has run out — after
    /// that no gateway reads a key the stuck node may still hold. Only if
    /// no fence comes within a few leases is the answer EIO.
    async fn commit(&self, l: &Layout, changes: Vec<Change>, op: &str) -> FsResult<()> {
        let epoch = l.config.epoch;
        let all = changes.len();
        let changes: Vec<Change> = changes
            .into_iter()
            .filter(|c| !matches!(c, Change::Del(K::Stat(f)) if self.known_empty.known_empty(epoch, *f)))
            .collect();
        self.metrics.count(op, "known_empty", (all - changes.len()) as u64);
        if changes.is_empty() {
            return Ok(());
        }
        let n = changes.len() as u64;
        let before = self.known_empty.generation();
        let mut failed = self.apply(l, &changes).await;
        if failed.is_empty() {
            self.metrics.count(op, "ok", n);
            let stats = changes.iter().filter_map(|c| match c {
                Change::Del(K::Stat(f)) => Some(*f),
                _ => None,
            });
            self.known_empty.deleted(epoch, before, stats);
            return Ok(());
        }
        let give_up = Instant::now() + Duration::from_millis(l.config.lease_ms.max(1)) * 4 + Duration::from_secs(1);
        let mut keys = l.keys.clone();
        for _ in 0..3 {
            let stuck: Vec<String> = failed.iter().map(|e| e.node().to_string()).collect();
            for (e, node) in failed.iter().zip(&stuck) {
                tracing::warn!(error = %e, op, "cache node did not confirm an update: asking for it to be fenced");
                self.fences.want(node);
            }
            if !self.layouts.wait_for(|c| stuck.iter().all(|s| !c.nodes.contains(s)), give_up).await {
                break;
            }
            let next = self.layouts.current();
            // every layout that still held a stuck node must be past its lease
            self.layouts.outwait_previous().await;
            let Some(nl) = next else {
                self.metrics.count(op, "fenced", n);
                return Ok(());
            };
            // Keys of the new epoch were claimed after our disk operation, so
            // they hold nothing older; delete ours there anyway (a delete is
            // right whatever the new layout's block size).
            let dels = bank_changes::previous_deletes(&changes, &keys, &nl.keys);
            failed = nl.bank.update_each(&dels, Some(self.opts.deadline)).await;
            if failed.is_empty() {
                self.metrics.count(op, "fenced", n);
                return Ok(());
            }
            keys = nl.keys.clone();
        }
        self.metrics.count(op, "error", n);
        tracing::warn!(op, "cache nodes neither confirmed nor were fenced in time; answering EIO");
        Err(FsError::EIO)
    }

    /// Send the changes to the current layout and, as deletions, to every
    /// layout replaced less than a lease ago; the nodes that did not confirm.
    async fn apply(&self, l: &Layout, changes: &[Change]) -> Vec<BankError> {
        let ups = bank_changes::updates(changes, &l.keys, l.bank.codec());
        let cur = l.bank.update_each(&ups, Some(self.opts.deadline));
        let old = futures::future::join_all(self.layouts.previous().into_iter().map(|(p, until)| async move {
            if p.config.nodes.iter().any(|n| l.config.fenced.contains(n)) {
                // A fenced node cannot confirm deletes; outwaiting the old
                // epoch's lease makes its keys unreadable all the same.
                tokio::time::sleep_until(until.into()).await;
                return Vec::new();
            }
            let dels = bank_changes::previous_deletes(changes, &l.keys, &p.keys);
            p.bank.update_each(&dels, Some(self.opts.deadline)).await
        }));
        let (mut failed, old) = tokio::join!(cur, old);
        failed.extend(old.into_iter().flatten());
        failed
    }

    /// Block payloads for `[first, last]` from an aligned read that started
    /// at block `first` (a short read ends the file: later blocks are empty).
    fn blocks_of(fid: FileId, first: u64, last: u64, bs: u64, data: &Bytes, add: bool) -> Vec<Change> {
        (first..=last)
            .map(|n| {
                let s = ((n - first) * bs) as usize;
                let payload =
                    if s < data.len() { data.slice(s..(s + bs as usize).min(data.len())) } else { Bytes::new() };
                Change::Put { k: K::Block(fid, n), payload, add }
            })
            .collect()
    }

    /// Read block `n` back from disk as it is now.
    async fn read_back(&self, loc: &Loc, fid: FileId, n: u64, bs: u64) -> Change {
        match self.below.read(loc, n * bs, bs as u32).await {
            Ok(d) => Change::Put { k: K::Block(fid, n), payload: d, add: false },
            Err(_) => Change::Del(K::Block(fid, n)),
        }
    }

    /// The blocks a shrink from `old` to `new` bytes changes: the one holding
    /// the new end and every one past it are deleted. (Not rewritten: a
    /// truncate reaches every server, and only the block's owner may store
    /// it — a delete is safe from anyone.)
    fn shrink(&self, l: &Layout, fid: FileId, new: u64, old: u64, out: &mut Vec<Change>) {
        if new >= old {
            return;
        }
        let bs = l.keys.block_size as u64;
        let (first, last) = (new / bs, (old - 1) / bs);
        out.extend((first..=last).map(|n| Change::Del(K::Block(fid, n))));
    }

    /// A fresh file written here was closed: put the blocks it wrote here
    /// (and only those: they are the ones this server owns), off the reply
    /// path, as a populate (under the file's shared lock, add-if-absent).
    /// From the moment it is no longer fresh, later writes rewrite as usual.
    async fn put_at_close(self: Arc<Self>, loc: Loc, fid: FileId) {
        let Some(l) = self.layouts.current() else { return };
        let bs = l.keys.block_size as u64;
        let _g = self.order.shared(fid).await;
        let Some(blocks) = self.never_cached.to_put(fid) else { return };
        self.never_cached.putting(fid);
        let mut ch = Vec::with_capacity(blocks.len());
        for b in blocks {
            match self.below.read(&loc, b * bs, bs as u32).await {
                Ok(d) => ch.push(Change::Put { k: K::Block(fid, b), payload: d, add: true }),
                Err(_) => return,
            }
        }
        let _ = l.bank.update(&bank_changes::updates(&ch, &l.keys, l.bank.codec()), None).await;
        self.metrics.count("populate", "at_close", ch.len() as u64);
    }

    /// Threaded mode: put back the blocks a write invalidated, off the reply
    /// path, under the file's shared lock like any populate.
    async fn repopulate(self: Arc<Self>, loc: Loc, fid: FileId, first: u64, last: u64) {
        let Some(l) = self.layouts.current() else { return };
        let bs = l.keys.block_size as u64;
        let _g = self.order.shared(fid).await;
        if let Ok(data) = self.below.read(&loc, first * bs, ((last - first + 1) * bs) as u32).await {
            self.never_cached.putting(fid);
            let ch = Self::blocks_of(fid, first, last, bs, &data, true);
            let _ = l.bank.update(&bank_changes::updates(&ch, &l.keys, l.bank.codec()), None).await;
            self.metrics.count("populate", "queued", ch.len() as u64);
        }
    }
}

#[async_trait]
impl Stateful for SmCache {
    fn name(&self) -> &str {
        "smcache"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    /// A getattr or lookup may feed a gateway's populate of the file's stat:
    /// its delete is no longer known unneeded (see `known_empty`).
    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        let r = self.inner.known_empty.reading(loc.fid);
        let a = self.below.getattr(loc).await?;
        r.answered(a.fid);
        Ok(a)
    }

    /// A listing's attributes, like a getattr of each.
    async fn getattrs(&self, locs: &[Loc]) -> FsResult<Vec<Option<Attr>>> {
        let r = self.inner.known_empty.reading(None);
        let got = self.below.getattrs(locs).await?;
        r.answered_all(locs.iter().filter_map(|l| l.fid).chain(got.iter().flatten().map(|a| a.fid)));
        Ok(got)
    }

    /// A listing with attributes may feed the gateway's populates of the
    /// listed files' stats (CMCache fills what its bank lacked from it),
    /// like a getattr of each.
    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        if !plus {
            return self.below.readdir(loc, cookie, max, plus).await;
        }
        let r = self.inner.known_empty.reading(None);
        let got = self.below.readdir(loc, cookie, max, plus).await?;
        r.answered_all(got.iter().map(|e| e.fid));
        Ok(got)
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        let r = self.inner.known_empty.reading(None);
        let a = self.below.lookup(parent, name).await?;
        r.answered(a.fid);
        Ok(a)
    }

    /// Read whole covering blocks, answer the requested range, and queue the
    /// blocks with add-if-absent semantics — while holding the file's shared
    /// lock, so no write can slip between our disk read and our populate.
    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        let i = &self.inner;
        let (Some(l), Some(fid)) = (i.layouts.current(), loc.fid) else {
            return self.below.read(loc, offset, size).await;
        };
        let bs = l.keys.block_size as u64;
        let Some((first, last)) = l.keys.covering(offset, size as u64) else {
            return self.below.read(loc, offset, size).await;
        };
        let (astart, alen) = (first * bs, (last - first + 1) * bs);
        if alen > MAX_POPULATE {
            return self.below.read(loc, offset, size).await;
        }
        let _g = i.order.shared(fid).await;
        let data = self.below.read(loc, astart, alen as u32).await?;
        let rel = (offset - astart) as usize;
        let out = data.slice(rel.min(data.len())..(rel + size as usize).min(data.len()));
        i.never_cached.putting(fid);
        let ch = Inner::blocks_of(fid, first, last, bs, &data, true);
        let _ = l.bank.update(&bank_changes::updates(&ch, &l.keys, l.bank.codec()), None).await;
        i.metrics.count("populate", "queued", ch.len() as u64);
        Ok(out)
    }

    /// Write to disk, then rewrite every covering block (full ones from the
    /// payload, partial ones read back) and drop the file's stat, and only
    /// then reply.
    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return self.below.write(loc, offset, data).await };
        // a write by path still changes blocks keyed by the file's id
        let fid = i.fid_of(loc).await?;
        let bs = l.keys.block_size as u64;
        let g = i.order.exclusive(fid).await;
        let r = self.below.write(loc, offset, data.clone()).await?;
        let n = r.written as u64;
        let mut ch = vec![Change::Del(K::Stat(fid))];
        let mut span = l.keys.covering(offset, n);
        if let (true, Some((first, last))) = (i.never_cached.contains(fid), span) {
            // nothing of it was ever stored: nothing to rewrite (see
            // `never_cached`); the blocks are put when the file is closed
            i.never_cached.wrote(fid, first, last);
            i.metrics.count("update", "fresh", last - first + 1);
            span = None;
        }
        if let Some((first, last)) = span {
            for b in first..=last {
                let s = b * bs;
                if i.opts.threaded {
                    ch.push(Change::Del(K::Block(fid, b)));
                } else if s >= offset && s + bs <= offset + n {
                    let at = (s - offset) as usize;
                    ch.push(Change::Put { k: K::Block(fid, b), payload: data.slice(at..at + bs as usize), add: false });
                } else {
                    ch.push(i.read_back(loc, fid, b, bs).await);
                }
            }
        }
        i.commit(&l, ch, "update").await?;
        drop(g);
        if let (true, Some((first, last))) = (i.opts.threaded, span) {
            if (last - first + 1) * bs <= MAX_POPULATE {
                tokio::spawn(i.clone().repopulate(loc.clone(), fid, first, last));
            }
        }
        Ok(r)
    }

    /// As a write of the destination whose bytes this server never holds
    /// in memory: under the file's lock, copy on disk, then drop the
    /// destination's stat and every block the spans cover (a later read
    /// populates them again), and only then reply. A fresh destination has
    /// nothing stored to drop: its copied blocks are put at close, as its
    /// written ones.
    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return self.below.copy_range(src, dst, ranges).await };
        let fid = i.fid_of(dst).await?;
        let g = i.order.exclusive(fid).await;
        // (dropped even when it failed: a failed copy may have landed a part)
        let r = self.below.copy_range(src, dst, ranges).await;
        let fresh = i.never_cached.contains(fid);
        let mut ch = vec![Change::Del(K::Stat(fid))];
        // (whole spans: a short copy may have landed part of the next one)
        for s in ranges {
            let Some((first, last)) = l.keys.covering(s.dst, s.len) else { continue };
            if fresh {
                i.never_cached.wrote(fid, first, last);
                i.metrics.count("update", "fresh", last - first + 1);
                continue;
            }
            ch.extend((first..=last).map(|b| Change::Del(K::Block(fid, b))));
        }
        i.commit(&l, ch, "update").await?;
        drop(g);
        r
    }

    /// A fresh file written here is put in the bank once closed (see
    /// [`Inner::put_at_close`]), so another gateway's first read finds it.
    async fn release(&self, loc: &Loc) -> FsResult<()> {
        let i = &self.inner;
        self.below.release(loc).await?;
        if let Some(fid) = loc.fid.filter(|f| i.never_cached.to_put(*f).is_some()) {
            tokio::spawn(i.clone().put_at_close(loc.clone(), fid));
        }
        Ok(())
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return self.below.setattr(loc, set).await };
        let Some(new) = set.size else {
            let r = self.below.setattr(loc, set).await?;
            i.commit(&l, vec![Change::Del(K::Stat(r.fid))], "invalidate").await?;
            return Ok(r);
        };
        let fid = i.fid_of(loc).await?;
        let _g = i.order.exclusive(fid).await;
        let old = self.below.getattr(loc).await?;
        let r = self.below.setattr(loc, set).await?;
        let mut ch = vec![Change::Del(K::Stat(fid))];
        i.shrink(&l, fid, new, old.size, &mut ch);
        i.commit(&l, ch, "update").await?;
        Ok(r)
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        let i = &self.inner;
        let Some(l) = i.layouts.current().filter(|_| is_trunc(flags)) else {
            // an open that does not truncate changes nothing the bank holds
            return self.below.open(loc, flags).await;
        };
        let fid = i.fid_of(loc).await?;
        let _g = i.order.exclusive(fid).await;
        let old = self.below.getattr(loc).await?;
        self.below.open(loc, flags).await?;
        let mut ch = vec![Change::Del(K::Stat(fid))];
        if old.kind == FileKind::File {
            i.shrink(&l, fid, 0, old.size, &mut ch);
        }
        i.commit(&l, ch, "update").await
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return self.below.create(parent, new, flags).await };
        // O_TRUNC on an existing file truncates it: treat like setattr(size 0).
        let mut pre = None;
        if is_trunc(flags) && !new.exclusive {
            if let Ok(a) = self.below.lookup(parent, &new.name).await {
                if a.kind == FileKind::File {
                    let g = i.order.exclusive(a.fid).await;
                    pre = Some((self.below.getattr(&Loc::new(parent.child(&new.name).path, Some(a.fid))).await?, g));
                }
            }
        }
        let r = self.below.create(parent, new, flags).await?;
        if r.attr.fid == new.fid {
            // made here with the id the gateway drew: no block of it exists
            i.never_cached.created(r.attr.fid);
        }
        let pfid = i.fid_of(parent).await?;
        // A new name, or an existing file opened untouched, leaves the
        // entry and the file's stat as they were (see `created`); only a
        // truncation changes the file.
        let mut ch = vec![Change::Del(K::Stat(pfid))];
        if let Some((old, _g)) = &pre {
            ch.push(Change::Del(K::Dentry(pfid, new.name.clone())));
            ch.push(Change::Del(K::Stat(r.attr.fid)));
            if old.fid == r.attr.fid {
                i.shrink(&l, r.attr.fid, 0, old.size, &mut ch);
            }
        }
        i.commit(&l, ch, "invalidate").await?;
        Ok(r)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        let r = self.below.mkdir(parent, new).await?;
        self.created(parent, None).await?;
        Ok(r)
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        let r = self.below.mknod(parent, new, mode, rdev).await?;
        self.created(parent, None).await?;
        Ok(r)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        let r = self.below.symlink(parent, new, target).await?;
        self.created(parent, None).await?;
        Ok(r)
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        let r = self.below.link(loc, newparent, newname).await?;
        // the new name is new (see `created`); the file's nlink changed
        self.created(newparent, Some(r.attr.fid)).await?;
        Ok(r)
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.below.unlink(parent, name).await?;
        self.namespace(parent, name, Some(r.fid)).await?;
        Ok(r)
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.below.rmdir(parent, name).await?;
        self.namespace(parent, name, Some(r.fid)).await?;
        Ok(r)
    }

    async fn rename(
        &self,
        parent: &Loc,
        name: &str,
        newparent: &Loc,
        newname: &str,
        flags: RenameFlags,
    ) -> FsResult<Renamed> {
        let i = &self.inner;
        let r = self.below.rename(parent, name, newparent, newname, flags).await?;
        let Some(l) = i.layouts.current() else { return Ok(r) };
        let (p, np) = (i.fid_of(parent).await?, i.fid_of(newparent).await?);
        let mut ch = vec![
            Change::Del(K::Dentry(p, name.to_string())),
            Change::Del(K::Dentry(np, newname.to_string())),
            Change::Del(K::Stat(p)),
            Change::Del(K::Stat(np)),
            Change::Del(K::Stat(r.moved)),
        ];
        if let Some(x) = &r.replaced {
            ch.push(Change::Del(K::Stat(x.fid)));
        }
        i.commit(&l, ch, "invalidate").await?;
        Ok(r)
    }

    /// See `fallocate`: the stat, and the blocks whose bytes turned to zeros.
    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        self.fallocate_here(loc, mode, ranges).await
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.below.setxattr(loc, name, value, flags).await?;
        self.touched(loc).await
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.below.removexattr(loc, name).await?;
        self.touched(loc).await
    }
}

impl SmCache {
    /// After a namespace change in `parent` (entry `name`, affecting file
    /// `child` if known): drop the parent's stat, the entry, the child's stat.
    async fn namespace(&self, parent: &Loc, name: &str, child: Option<FileId>) -> FsResult<()> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return Ok(()) };
        let p = i.fid_of(parent).await?;
        let mut ch = vec![Change::Del(K::Stat(p)), Change::Del(K::Dentry(p, name.to_string()))];
        if let Some(c) = child {
            ch.push(Change::Del(K::Stat(c)));
        }
        i.commit(&l, ch, "invalidate").await
    }

    /// After a new name appeared in `parent`: drop the parent's stat (and
    /// the stat of an existing file given a new name, `linked`).
    ///
    /// The new name's entry and the new object's stat are left alone: no
    /// value can be there (an object's id is new, and the name had none
    /// since its last removal deleted it), only the placeholder the
    /// creating gateway claimed before asking, which it fills from this
    /// reply (CMCache's create populate). A lookup elsewhere that claimed
    /// the entry first reads storage after its claim, so whatever it stores
    /// is right too.
    async fn created(&self, parent: &Loc, linked: Option<FileId>) -> FsResult<()> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return Ok(()) };
        let p = i.fid_of(parent).await?;
        let mut ch = vec![Change::Del(K::Stat(p))];
        ch.extend(linked.map(|f| Change::Del(K::Stat(f))));
        i.commit(&l, ch, "invalidate").await
    }

    /// A file's ctime changed: drop its stat.
    async fn touched(&self, loc: &Loc) -> FsResult<()> {
        let i = &self.inner;
        let Some(l) = i.layouts.current() else { return Ok(()) };
        let f = i.fid_of(loc).await?;
        i.commit(&l, vec![Change::Del(K::Stat(f))], "invalidate").await
    }
}
