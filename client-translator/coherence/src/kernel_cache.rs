//! What the kernel may cache, and for how long: the gateway's side of the
//! kernel-cache leases (the servers' side is the server graph's callbacks).
//!
//! ```text
//!  upcall from server i ── Upcall{lease, items} ──> KernelCache::apply ─ blocking thread ─> KernelNotify
//!                                                     (bump epoch first)    inval_inode / inval_entry
//!  FUSE request: ticket() at start ──> graph ──> ttl(ticket) in the reply
//! ```
//!
//! A TTL handed to the kernel never outlives the lease of *every* server (a
//! lease counts from when its poll was sent, so it ends before the server's
//! view of it), and is 0 when an invalidation arrived while the request was
//! under way (its answer may predate the change), when an inode it covers is
//! not yet held on every server (`holds`: a change of it would not wait for
//! this gateway; the memo does not answer for it either), or when the lease is lost:
//! then the kernel's entries and attributes expire by themselves, and the
//! pages it keeps are checked against size and mtime on the next read
//! (`FUSE_AUTO_INVAL_DATA`). Kernel notifications never run on a fuser
//! thread: the kernel may wait on a request that thread would have to read.

use crate::answered_here::AnsweredHere;
use crate::holds::Holds;
use crate::inodes::Inodes;
use crate::kernel_notify::{quiet, KernelNotify};
use crate::memo::{Asked, Memo, MemoTicket, MovedIn, Removing, Taken};
use crate::small_files;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use xlator::Invalidation;

/// Whether the kernel caches at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Entries, attributes and pages, under leases with callbacks (default).
    #[default]
    On,
    /// Nothing (TTL 0, pages re-validated on every read): every request
    /// reaches the gateway. For measurement, and as a fallback.
    Off,
}

/// How long an answer from the memo waits for the holds it needs (a round
/// is one round trip to every server, and the poll loops' apply).
const HOLD_WAIT: Duration = Duration::from_millis(200);

/// A request's view of the invalidations so far, and of the holds'
/// generation (taken when it starts).
#[derive(Clone, Copy, Debug)]
pub struct Ticket(u64, u64);

/// A name being added to a directory through this gateway (see
/// [`KernelCache::adding`]): the request's ticket, and the memo's epoch
/// just after the directory's attributes were forgotten for it.
pub(crate) struct Adding {
    t: Ticket,
    m: MemoTicket,
}

/// A removal or rename through this gateway under way (see
/// [`KernelCache::removing`]).
pub(crate) struct Removal {
    t: Ticket,
    r: Removing,
}

pub struct KernelCache {
    mode: Mode,
    inodes: Arc<Inodes>,
    base: Instant,
    /// per server: end of its lease, in ns after `base` (0: none)
    valid_until: Vec<AtomicU64>,
    /// bumped before every batch of invalidations reaches the kernel
    epoch: AtomicU64,
    /// what the latest batches named, by epoch (see [`Recent`])
    recent: std::sync::Mutex<Recent>,
    /// how the kernel is told to forget (the FUSE bridge's)
    notifier: OnceLock<Box<dyn KernelNotify>>,
    /// what was answered, for re-validations (see `memo`)
    memo: Memo,
    /// what was answered from `memo` (metrics)
    here: AnsweredHere,
    /// which inodes every server waits for this gateway on
    holds: Arc<Holds>,
    /// callbacks received, by whether the kernel may hold what they name
    callbacks: prometheus::IntCounterVec,
}

impl KernelCache {
    pub(crate) fn new(mode: Mode, servers: usize, inodes: Arc<Inodes>) -> KernelCache {
        KernelCache {
            mode,
            inodes,
            base: Instant::now(),
            valid_until: (0..servers.max(1)).map(|_| AtomicU64::new(0)).collect(),
            epoch: AtomicU64::new(0),
            recent: std::sync::Mutex::default(),
            notifier: OnceLock::new(),
            memo: Memo::default(),
            here: AnsweredHere::default(),
            holds: Arc::new(Holds::new(servers)),
            callbacks: metric_series::counter_vec("imca_gateway_callbacks_total", "Invalidations received from the storage servers, by whether this gateway's kernel may hold what they name", &["kernel"]),
        }
    }

    /// Show the counts of answers given here, and of callbacks, in `registry`.
    pub(crate) fn register_metrics(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.callbacks.clone()))?;
        self.holds.register(registry)?;
        self.here.register(registry)
    }

    pub fn inodes(&self) -> &Arc<Inodes> {
        &self.inodes
    }

    pub fn holds(&self) -> &Arc<Holds> {
        &self.holds
    }

    /// How the kernel is told to forget, once the kernel session exists.
    pub(crate) fn set_notifier(&self, n: Box<dyn KernelNotify>) {
        let _ = self.notifier.set(n);
    }

    /// Keep a file's pages across opens (they are invalidated by callback).
    pub fn keep_cache(&self) -> bool {
        self.mode == Mode::On
    }

    pub fn ticket(&self) -> Ticket {
        Ticket(self.epoch.load(SeqCst), self.holds.generation())
    }

    /// The TTL for an answer about `inos` (an entry's: its directory's and
    /// its object's) to a request that started with `t`.
    pub fn ttl(&self, t: Ticket, inos: &[u64]) -> Duration {
        if self.mode == Mode::Off || !self.holds.check(inos) {
            return Duration::ZERO;
        }
        if self.epoch.load(SeqCst) != t.0 && self.recent.lock().unwrap_or_else(|p| p.into_inner()).named_since(t.0, inos) {
            return Duration::ZERO;
        }
        self.remaining()
    }

    /// Ask the servers to hold `ino` (what the memo keeps is served once
    /// they do); with kernel caching off nothing is held.
    fn want(&self, ino: u64) {
        if self.mode == Mode::On {
            self.holds.want(ino);
        }
    }

    /// The lease left, if no invalidation came since `t` (else 0).
    fn unmoved(&self, t: Ticket) -> Duration {
        if self.mode == Mode::Off || self.epoch.load(SeqCst) != t.0 {
            return Duration::ZERO;
        }
        self.remaining()
    }

    /// The memo's ticket for a request starting now.
    pub(crate) fn memo_ticket(&self) -> MemoTicket {
        self.memo.ticket()
    }

    /// A re-validation answered from what was answered before, while the
    /// lease holds (see `memo`); with the TTL to give.
    pub fn memo_attr(&self, ino: u64) -> Option<(xlator::Attr, Duration)> {
        self.memo_serves()?;
        let a = self.memo.attr(ino)?;
        self.holds.check(&[ino]).then_some(())?;
        self.here.getattr.inc();
        Some((a, self.remaining()))
    }

    /// [`KernelCache::memo_entry`] for `name` in directory `parent`.
    pub fn memo_entry(&self, parent: u64, name: &str) -> Option<(xlator::Attr, Duration)> {
        self.memo_serves()?;
        let a = self.memo.entry(parent, name)?;
        self.holds.check(&[parent, a.fid.ino()]).then_some(())?;
        self.here.lookup.inc();
        Some((a, self.remaining()))
    }

    /// [`KernelCache::memo_entry`], waiting (briefly) for the holds it
    /// needs when the memo has the entry but they are under way: a listing
    /// just remembered it (`ls -l` in a directory another gateway wrote).
    pub(crate) async fn memo_entry_soon(&self, parent: u64, name: &str) -> Option<(xlator::Attr, Duration)> {
        if let Some(r) = self.memo_entry(parent, name) {
            return Some(r);
        }
        self.memo_serves()?;
        let a = self.memo.entry(parent, name)?;
        if !self.holds.wait_held(&[parent, a.fid.ino()], HOLD_WAIT).await {
            return None;
        }
        self.memo_entry(parent, name)
    }

    /// The kernel forgot inode `ino`: its hold is given back.
    pub fn forgotten(&self, ino: u64) {
        self.holds.release(ino);
    }

    /// What the holds' registrar calls before giving `inos` back: the
    /// kernel drops them (see `holds`).
    pub(crate) fn drop_from_kernel(self: &Arc<Self>) -> crate::holds::DropFromKernel {
        let me = self.clone();
        Box::new(move |inos: Vec<u64>| {
            let me = me.clone();
            Box::pin(async move {
                let _ = tokio::task::spawn_blocking(move || {
                    if let Some(n) = me.notifier.get() {
                        for ino in inos {
                            quiet(n.inval_inode(ino, 0, 0));
                        }
                    }
                })
                .await;
            })
        })
    }

    /// Have directory `dir` and the objects of `listed` held (waiting
    /// briefly): a listing with attributes is about to hand them out.
    pub(crate) async fn hold_listed(&self, dir: u64, listed: &[xlator::DirEntry]) {
        if self.mode == Mode::On && !self.remaining().is_zero() {
            let inos: Vec<u64> = std::iter::once(dir).chain(listed.iter().map(|e| e.fid.ino())).collect();
            self.holds.wait_held(&inos, HOLD_WAIT).await;
        }
    }

    /// [`KernelCache::memo_attr`], waiting as [`KernelCache::memo_entry_soon`].
    pub(crate) async fn memo_attr_soon(&self, ino: u64) -> Option<(xlator::Attr, Duration)> {
        if let Some(r) = self.memo_attr(ino) {
            return Some(r);
        }
        self.memo_serves()?;
        self.memo.attr(ino)?;
        if !self.holds.wait_held(&[ino], HOLD_WAIT).await {
            return None;
        }
        self.memo_attr(ino)
    }

    fn memo_serves(&self) -> Option<()> {
        self.memo_serving().then_some(())
    }

    /// Whether what is remembered now is served (kernel caching on, lease held).
    pub(crate) fn memo_serving(&self) -> bool {
        self.mode == Mode::On && !self.remaining().is_zero()
    }

    /// A stat-ahead listing saw `n` entries (see `stat_ahead`).
    pub(crate) fn count_ahead(&self, n: usize) {
        self.here.stat_ahead.inc_by(n as u64);
    }

    /// Remember the answers of a request that started with `t` and `m`
    /// (only if no invalidation came meanwhile and the lease holds).
    pub(crate) fn remember_attr(&self, t: Ticket, m: MemoTicket, a: &xlator::Attr) {
        self.want(a.fid.ino());
        if !self.unmoved(t).is_zero() {
            self.memo.store_attr(m, a);
        }
    }

    /// Remember attributes fetched ahead of the kernel's asking, by a fetch
    /// that started with `t` and `m`, unless their inode was forgotten
    /// since or a callback came (see [`Memo::store_ahead`]).
    pub(crate) fn remember_ahead(&self, t: Ticket, m: MemoTicket, a: &xlator::Attr) {
        if !self.unmoved(t).is_zero() && self.memo.store_ahead(m, a) {
            self.here.dir_ahead.inc();
        }
    }

    /// False when nothing more fetched under `t` and `m` would be remembered.
    pub(crate) fn remember_entry(&self, t: Ticket, m: MemoTicket, parent: u64, name: &str, a: &xlator::Attr) -> bool {
        self.want(parent);
        self.want(a.fid.ino());
        !self.unmoved(t).is_zero() && self.memo.store_entry(m, parent, name, a)
    }

    /// Whether `name` is known not to exist in `parent` (a directory made
    /// through this gateway that holds only names remembered; see `memo`).
    pub fn memo_absent(&self, parent: u64, name: &str) -> bool {
        let absent = self.memo_serves().is_some() && self.memo.absent(parent, name) && self.holds.check(&[parent]);
        if absent {
            self.here.lookup_absent.inc();
        }
        absent
    }

    /// A name is being added to directory `parent` through this gateway:
    /// its remembered attributes go now, and again once answered
    /// ([`KernelCache::added`], with what this returns: a callback since
    /// voids the answer).
    pub(crate) fn adding(&self, parent: u64) -> Adding {
        let t = self.ticket();
        let m = self.memo.forget_attrs(parent);
        Adding { t, m }
    }

    /// Name `name` was added to directory `parent` through this gateway by
    /// the request [`KernelCache::adding`] began, answered `a` (None: it
    /// failed); `new` when `a` is the object that request created.
    /// `dir_after`, the directory's attributes just after the change as the
    /// answer carried them, is remembered if nothing forgot the directory
    /// since the change was sent; true if it was.
    pub(crate) fn added(&self, c: Adding, parent: u64, name: &str, a: Option<&xlator::Attr>, new: bool, dir_after: Option<&xlator::Attr>) -> bool {
        let t = c.t;
        let own = self.memo.forget_attrs(parent);
        if let Some(a) = a.filter(|_| new) {
            // the servers recorded the hold from the create itself
            self.holds.made(t.1, a.fid.ino());
        }
        // taken before the lease check: a callback between the two voids it
        let m = self.memo.ticket();
        let stored = match a {
            Some(a) if !self.unmoved(t).is_zero() && new => self.memo.store_created(m, parent, name, a),
            Some(a) if !self.unmoved(t).is_zero() => self.memo.store_entry(m, parent, name, a),
            _ => false,
        };
        if !stored {
            self.memo.incomplete(parent);
        }
        let kept = match dir_after {
            Some(d) if d.fid.ino() == parent && !self.unmoved(t).is_zero() => self.memo.store_after_change(c.m, own, d),
            _ => false,
        };
        if kept {
            self.here.dir_ahead.inc();
        }
        kept
    }

    /// Inode `ino` is being changed through this gateway (call before and
    /// after: the servers do not call back the gateway that asked). Its
    /// remembered attributes go, and the memo's epoch moves, so an answer
    /// under way meanwhile is not remembered.
    pub(crate) fn changing_inode(&self, ino: u64) {
        self.memo.forget_attrs(ino);
    }

    /// [`KernelCache::changing_inode`] for a change whose answer gives the
    /// attributes after it (a setattr, a write): hands back the attributes
    /// (and a small file's bytes) remembered before, and the memo's ticket
    /// for [`KernelCache::changed_attrs`].
    pub(crate) fn changing_attrs(&self, ino: u64) -> Taken {
        self.memo.take_attrs(ino)
    }

    /// The change [`KernelCache::changing_attrs`] gave `m` for, in a
    /// request that started with `t`, left inode `ino` with attributes `a`
    /// (None: unknown, or it failed) and, if known, the bytes `content`:
    /// remembered if nothing moved meanwhile and the lease holds, else
    /// forgotten.
    pub(crate) fn changed_attrs(&self, t: Ticket, m: MemoTicket, ino: u64, a: Option<&xlator::Attr>, content: Option<Bytes>) {
        self.memo.store_changed(m, ino, a.filter(|_| !self.unmoved(t).is_zero()), content);
    }

    /// A READ of `size` bytes at `offset` of inode `ino`, answered from the
    /// bytes remembered of a small file written here (see `small_files`).
    pub fn memo_read(&self, ino: u64, offset: u64, size: u32) -> Option<Bytes> {
        self.memo_serves()?;
        let d = self.memo.content(ino)?;
        self.holds.check(&[ino]).then_some(())?;
        self.here.read.inc();
        Some(small_files::slice(&d, offset, size))
    }

    /// [`KernelCache::changing_inode`] for its xattrs: its remembered
    /// capability goes too.
    pub(crate) fn changing_xattrs(&self, ino: u64) {
        self.memo.forget_inode(ino);
    }

    /// `names` in directory `parent` are being removed or moved away
    /// through this gateway (see [`Memo::removing`]); what it hands back
    /// goes to [`KernelCache::removed`] once the change is answered.
    pub(crate) fn removing(&self, parent: u64, names: &[&str]) -> Removal {
        let t = self.ticket();
        Removal { t, r: self.memo.removing(parent, names) }
    }

    /// The change [`KernelCache::removing`] began ended (`ok`), changing
    /// inodes `gone`, and maybe putting `moved_in` in the directory;
    /// `dir_after`, the directory's attributes just after as the answer
    /// carried them, is remembered if nothing forgot the directory since
    /// the change was sent and no callback came; true if it was.
    pub(crate) fn removed(&self, c: Removal, names: &[&str], ok: bool, gone: &[u64], moved_in: Option<MovedIn>, dir_after: Option<&xlator::Attr>) -> bool {
        let fresh = !self.unmoved(c.t).is_zero();
        let dir_after = dir_after.filter(|_| fresh);
        let moved_in = moved_in.map(|mi| MovedIn { attr: mi.attr.filter(|_| fresh), ..mi });
        let kept = self.memo.removed(c.r, names, ok, gone, moved_in, dir_after);
        if kept {
            self.here.dir_ahead.inc();
        }
        kept
    }

    /// Whether inode `ino` is known to lack xattr `x` (see [`Asked`]).
    ///
    /// A network round trip per write (`security.capability`) or per
    /// listed name (`security.selinux`) for an answer that is almost always
    /// "none". It is an attribute like the others: what a server answered
    /// holds under the lease, and a change elsewhere is called back for the
    /// inode (set and remove xattr invalidate its attributes), which
    /// forgets it here.
    pub fn known_absent(&self, ino: u64, x: Asked) -> bool {
        let none = self.memo_serves().is_some() && self.memo.lacks(ino, x) && self.holds.check(&[ino]);
        if none {
            match x {
                Asked::Capability => self.here.capability.inc(),
                Asked::Selinux => self.here.selinux.inc(),
            }
        }
        none
    }

    /// A `security.selinux` request answered EOPNOTSUPP here (labels are
    /// not passed through: see `xattrs`).
    pub fn refused_label(&self) {
        self.here.selinux.inc();
    }

    /// A server said inode `ino` lacks `x`, in answer to a request that
    /// started with `t` and `m`: remembered if nothing moved meanwhile.
    pub(crate) fn learned_absent(&self, t: Ticket, m: MemoTicket, ino: u64, x: Asked) {
        if !self.unmoved(t).is_zero() {
            self.memo.store_lack(m, ino, x);
        }
    }

    /// How long every server's lease still runs.
    pub fn remaining(&self) -> Duration {
        let now = self.base.elapsed().as_nanos() as u64;
        let end = self.valid_until.iter().map(|v| v.load(SeqCst)).min().unwrap_or(0);
        Duration::from_nanos(end.saturating_sub(now))
    }

    /// Server `i` granted a lease ending at `until`.
    pub(crate) fn renew(&self, i: usize, until: Instant) {
        let ns = until.saturating_duration_since(self.base).as_nanos() as u64;
        let before = self.valid_until[i].fetch_max(ns, SeqCst);
        if before <= self.base.elapsed().as_nanos() as u64 {
            // The lease had lapsed: callbacks were not waited for meanwhile.
            self.memo.clear();
        }
    }

    /// Tell the kernel to drop `items`; returns once it has. Answers that
    /// were under way meanwhile get TTL 0.
    pub(crate) async fn apply(self: &Arc<Self>, items: &[Invalidation]) {
        if items.is_empty() {
            return;
        }
        {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            let epoch = self.epoch.fetch_add(1, SeqCst) + 1;
            recent.note(epoch, items);
        }
        for item in items {
            match item {
                Invalidation::Inode { fid, .. } => self.memo.forget_inode(fid.ino()),
                Invalidation::Entry { parent, name } => self.memo.forget_entry(parent.ino(), name),
                Invalidation::All => self.memo.clear(),
            }
        }
        // Callbacks go to every gateway, most of them for files this one's
        // kernel never held: those need no hop to a blocking thread (two
        // wake-ups), which the writer waits for (docs/benchmarks/archive/issue-12-kernel-caching.md, stop
        // 21). Checked after the epoch moved: an answer that makes the
        // kernel hold one of them from now on gets TTL 0.
        let total = items.len();
        let items: Vec<Invalidation> = items.iter().filter(|i| self.kernel_may_hold(i)).cloned().collect();
        self.callbacks.with_label_values(&["held"]).inc_by(items.len() as u64);
        self.callbacks.with_label_values(&["not_held"]).inc_by((total - items.len()) as u64);
        if items.is_empty() {
            return;
        }
        let me = self.clone();
        // A blocking write to /dev/fuse that may wait for page locks: never
        // on a fuser thread, never on a runtime worker.
        let _ = tokio::task::spawn_blocking(move || me.notify(&items)).await;
    }

    /// Whether the kernel may hold what `item` invalidates.
    fn kernel_may_hold(&self, item: &Invalidation) -> bool {
        match item {
            Invalidation::Inode { fid, .. } => self.inodes.knows(fid.ino()),
            Invalidation::Entry { parent, name } => self.inodes.knows_entry(parent.ino(), name),
            Invalidation::All => true,
        }
    }

    /// This gateway wrote `len` bytes at `offset` where the kernel did not
    /// (an append it placed at the volume's end): the kernel drops its pages
    /// of that range, which another opener may have read, and the file's
    /// attributes; returns once it has. No epoch moves: the kernel itself
    /// ignores attributes asked for before a write, and the memo was told
    /// ([`KernelCache::changing_inode`]).
    pub(crate) async fn written_elsewhere(self: &Arc<Self>, ino: u64, offset: u64, len: u64) {
        let Ok(offset) = i64::try_from(offset) else { return };
        let (me, len) = (self.clone(), i64::try_from(len).unwrap_or(0));
        let _ = tokio::task::spawn_blocking(move || {
            if let (Some(n), true) = (me.notifier.get(), me.inodes.knows(ino)) {
                quiet(n.inval_inode(ino, offset, len));
            }
        })
        .await;
    }

    fn notify(&self, items: &[Invalidation]) {
        let Some(n) = self.notifier.get() else { return };
        for item in items {
            match item {
                // (`apply` kept only what the kernel may hold; one it dropped
                // since answers ENOENT)
                Invalidation::Inode { fid, offset, len } => quiet(n.inval_inode(fid.ino(), *offset, *len)),
                Invalidation::Entry { parent, name } => {
                    // Counted dropped first: an answer remembered from now
                    // on is dropped below or counted again (never lost).
                    self.inodes.entry_dropped(parent.ino(), name);
                    quiet(n.inval_entry(parent.ino(), name))
                }
                Invalidation::All => {
                    for (ino, parent, name) in self.inodes.all_entries() {
                        quiet(n.inval_inode(ino, 0, 0));
                        if let Some(p) = parent {
                            quiet(n.inval_entry(p, &name));
                        }
                    }
                }
            }
        }
    }
}

/// The inodes the latest batches of invalidations named, so that an answer
/// under way while one arrived gets TTL 0 only if it is about one of them
/// (an entry's answer is about its directory and its object; an entry
/// invalidation is recorded under its directory). Invalidations reach
/// every gateway, most of them about files the answer does not concern:
/// with one epoch for all, a trickle of them from writes elsewhere voided
/// every answer under way, and a listing held just before (`holds`) lost
/// its TTLs to the invalidations the hold itself made it apply.
#[derive(Default)]
struct Recent {
    /// (epoch of the batch, inode or [`RECENT_ALL`])
    named: std::collections::VecDeque<(u64, u64)>,
    /// the latest epoch some of whose inodes were dropped from `named`
    dropped: u64,
}

/// How many inodes [`Recent`] keeps.
const RECENT: usize = 4096;
/// In [`Recent`]: everything (no inode is 0).
const RECENT_ALL: u64 = 0;

impl Recent {
    fn note(&mut self, epoch: u64, items: &[Invalidation]) {
        for item in items {
            let ino = match item {
                Invalidation::Inode { fid, .. } => fid.ino(),
                Invalidation::Entry { parent, .. } => parent.ino(),
                Invalidation::All => RECENT_ALL,
            };
            if self.named.len() == RECENT {
                if let Some((e, _)) = self.named.pop_front() {
                    self.dropped = self.dropped.max(e);
                }
            }
            self.named.push_back((epoch, ino));
        }
    }

    /// Whether a batch after epoch `since` named one of `inos` (or it
    /// cannot tell: some were dropped).
    fn named_since(&self, since: u64, inos: &[u64]) -> bool {
        self.dropped > since || self.named.iter().rev().take_while(|(e, _)| *e > since).any(|(_, i)| *i == RECENT_ALL || inos.contains(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator::FileId;

    #[test]
    fn an_answer_is_voided_only_by_invalidations_of_what_it_is_about() {
        let mut r = Recent::default();
        let (dir, a, b) = (FileId(2), FileId(3), FileId(4));
        r.note(1, &[Invalidation::attrs(a)]);
        r.note(2, &[Invalidation::entry(dir, "x")]);
        assert!(r.named_since(0, &[a.ino()]), "a's attributes changed after epoch 0");
        assert!(!r.named_since(1, &[a.ino()]), "not after epoch 1");
        assert!(!r.named_since(0, &[b.ino()]), "nothing about b");
        assert!(r.named_since(1, &[dir.ino(), b.ino()]), "an entry of dir went: a lookup in dir is voided");
        r.note(3, &[Invalidation::All]);
        assert!(r.named_since(2, &[b.ino()]), "everything went");
        // Past its bound it cannot tell for epochs it no longer covers.
        let mut r = Recent::default();
        for e in 1..=RECENT as u64 + 1 {
            r.note(e, &[Invalidation::attrs(a)]);
        }
        assert!(r.named_since(0, &[b.ino()]), "epoch 1's inodes were dropped");
        assert!(!r.named_since(1, &[b.ino()]));
    }
}
