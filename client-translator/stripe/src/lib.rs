//! stripe — one volume out of S storage servers.
//!
//! ```text
//!  (above: cmcache or io-stats)
//!        │
//!     stripe ──┬── protocol-client → server 0   (unit 0, S, 2S, … ; the namespace "lock")
//!              ├── protocol-client → server 1   (unit 1, S+1, …)
//!              └── …
//! ```
//!
//! * Data: unit *i* of a file lives on server *i mod S* at the same logical
//!   offset, in a sparse file ([`layout`]). A request is cut into per-server
//!   pieces that all go out at once. A copy_file_range is made by the
//!   servers, each between its own copies, when every unit lands on the
//!   server that holds its source ([`copy_range`]).
//! * Namespace: every file and directory exists on every server with the same
//!   file id. Server 0 serialises racing gateways, and its answer decides the
//!   file id. A new name goes to every server at once with the id the gateway
//!   drew, and a follower that disagrees with server 0's decision follows it
//!   ([`create`]); removals, renames and links run on server 0 first, then on
//!   the others in parallel. When a follower fails, what was created is
//!   rolled back so a retry starts from a clean slate (and a failed create's
//!   opens released, or the servers would keep the removed file open).
//! * Attributes: a file's are merged from every server ([`merge`]): size
//!   max, blocks sum, times latest. Everything else (directories, symlinks,
//!   listings, symlink targets, xattr reads) comes from server 0 alone: a
//!   lookup asks server 0 first and the others only for a file; a getattr of
//!   a known directory id asks server 0 only ([`kinds`]).
//! * Locks: every getlk/setlk of a file goes to its *ordering server*
//!   ([`layout::ordering_server`]), whose lock table alone decides.
//! * Errors: if any server fails, the operation fails (EIO preferred: it says a
//!   server is unreachable). A write is the exception: it answers the
//!   contiguous prefix that landed and cuts back what landed past it
//!   ([`write`]), so a full server leaves no zero-filled units.
//! * Repair: a removal or rename that fails half-way (a follower crashed)
//!   leaves server 0 holding the outcome; a lookup that finds a follower
//!   disagreeing repairs that follower ([`heal`]; a copy's mode and owner
//!   too, [`heal_attrs`]), and the walk ([`walk`],
//!   started by setting [`HEAL_XATTR`]) repairs a whole tree. A follower's
//!   step of an operation accepts what a heal already did, and a stray in
//!   the way of a create is removed first (`create::follow`).
//!   Every operation that leaves servers differing records the name in a
//!   bounded index ([`pending`]), and a background task ([`healer`]) heals
//!   those names once the servers answer again; a write some of whose
//!   pieces failed is counted and logged (`write`).

mod copy_range;
mod create;
mod fallocate;
mod heal;
mod heal_attrs;
mod healer;
mod kinds;
pub mod layout;
pub mod merge;
mod metrics;
mod pending;
mod merged_listing;
mod walk;
mod write;

pub use create::IN_FLIGHT;
pub use heal::HealReport;
pub use pending::MAX_PENDING;
pub use walk::{HEAL_XATTR, MAX_PASSES};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use merge::{all_ok, merge_attrs, merge_after_change, merge_statfs};
use std::future::Future;
use std::pin::Pin;
use xlator::*;

/// The default stripe unit: 128 KiB (a multiple of every sane IMCa block size).
pub const DEFAULT_STRIPE_UNIT: u64 = 128 * 1024;

type Fut<'a, T> = Pin<Box<dyn Future<Output = FsResult<T>> + Send + 'a>>;

#[derive(Debug, thiserror::Error)]
pub enum StripeError {
    #[error("stripe needs at least one storage server")]
    NoServers,
    #[error("stripe unit must be a power of two of at least 4096 bytes, got {0}")]
    BadUnit(u64),
}

pub struct Stripe {
    subvols: Vec<Next>,
    unit: u64,
    dirs: kinds::DirIds,
    moves: heal::Moves,
    /// how young a new follower-only object is left by the heal
    heal_grace: std::time::Duration,
    /// names left differing, for the background heal
    pending: pending::Pending,
    /// files whose failed write was logged already (once each)
    torn_logged: write::Logged,
}

/// How many directory ids stripe remembers.
const DIR_IDS: usize = 1 << 16;

impl Stripe {
    pub fn new(subvols: Vec<Next>, unit: u64) -> Result<Stripe, StripeError> {
        if subvols.is_empty() {
            return Err(StripeError::NoServers);
        }
        if unit < 4096 || !unit.is_power_of_two() {
            return Err(StripeError::BadUnit(unit));
        }
        Ok(Stripe {
            subvols,
            unit,
            dirs: kinds::DirIds::new(DIR_IDS),
            moves: heal::Moves::new(),
            heal_grace: IN_FLIGHT,
            pending: pending::Pending::new(metrics::Metrics::new()),
            torn_logged: write::Logged::new(),
        })
    }

    /// How young a pristine follower-only object must be for the heal to
    /// leave it as a possible create under way (default [`IN_FLIGHT`], the
    /// bound on such a create; shorter only where no gateway creates, such
    /// as tests that make a follower miss a step by hand).
    pub fn with_heal_grace(mut self, grace: std::time::Duration) -> Stripe {
        self.heal_grace = grace;
        self
    }

    /// Register stripe's metrics (heals pending and done, writes that
    /// failed part-way) in the gateway's registry.
    pub fn register_metrics(&self, registry: &prometheus::Registry) {
        self.pending.metrics.register(registry);
    }

    pub fn unit(&self) -> u64 {
        self.unit
    }

    pub fn servers(&self) -> &[Next] {
        &self.subvols
    }

    fn first(&self) -> &Next {
        &self.subvols[0]
    }

    /// The file's ordering server, which alone decides its locks.
    fn orderer(&self, loc: &Loc) -> &Next {
        &self.subvols[layout::ordering_server(loc.fid, self.subvols.len())]
    }

    fn rest(&self) -> &[Next] {
        &self.subvols[1..]
    }

    /// Run `f` on every server at once; results in server order.
    async fn on_all<'a, T>(&'a self, f: impl Fn(&'a Next) -> Fut<'a, T>) -> Vec<FsResult<T>> {
        join_all(self.subvols.iter().map(f)).await
    }

    async fn on_rest<'a, T>(&'a self, f: impl Fn(&'a Next) -> Fut<'a, T>) -> Vec<FsResult<T>> {
        join_all(self.rest().iter().map(f)).await
    }

    /// A rename a follower cannot find the source of is done when the
    /// target already holds the moved id (a heal moved or linked it).
    async fn settle_rename(
        &self,
        newparent: &Loc,
        newname: &str,
        moved: FileId,
        rest: Vec<FsResult<Renamed>>,
    ) -> Vec<FsResult<Renamed>> {
        join_all(self.rest().iter().zip(rest).map(|(s, r)| async move {
            match r {
                Err(FsError::ENOENT) => match s.lookup(newparent, newname).await {
                    // (done by a heal: this server's directories after it are unknown)
                    Ok(a) if a.fid == moved => Ok(Renamed { moved, replaced: None, dir: None, newdir: None, moved_attr: None }),
                    _ => Err(FsError::ENOENT),
                },
                r => r,
            }
        }))
        .await
    }

    /// Server 0's step of `op` on `parent/name`: an EIO (a timeout, a lost
    /// connection) may hide a step it did all the same, which the
    /// followers were then never asked to do: the name goes to the
    /// background heal, which finds out.
    fn unanswered<T>(&self, op: &str, parent: &Loc, name: &str, r: FsResult<T>) -> FsResult<T> {
        if matches!(r, Err(FsError::EIO)) {
            self.pending.record(op, parent, name);
        }
        r
    }

    /// Directory `dir`'s attributes after a namespace change, from every
    /// server's copy in its answer (`copies`, server order): what a getattr
    /// of it would have answered (see [`merge_after_change`]), so the gateway
    /// need not send one. None unless every server gave its copy.
    fn dir_after(&self, dir: &Loc, copies: Vec<Option<Attr>>) -> Option<Attr> {
        let a = merge_after_change(copies, self.dirs.is_dir(dir.fid))?;
        self.dirs.note(&a);
        Some(a)
    }

    /// After server 0 applied `op` to `parent/name`: a follower that failed
    /// left the servers differing; the name goes to the background heal.
    fn note_partial(&self, op: &str, parent: &Loc, name: &str, results: &[FsResult<impl Sized>]) -> bool {
        if results.iter().all(|r| r.is_ok()) {
            return false;
        }
        let path = parent.child(name).path;
        tracing::error!(op, path, "stripe: operation failed on some servers after server 0 applied it; servers differ until the background heal");
        self.pending.record(op, parent, name);
        true
    }
}

#[async_trait]
impl xlator::complete::Complete for Stripe {
    fn name(&self) -> &str {
        "stripe"
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        // Server 0's answer decides (kind, id, ENOENT); a file's attributes
        // are merged from every server. All are asked at once, so a file
        // costs one round trip, not two; a directory's extra answers are
        // dropped. A server that answered for another id (a race with a
        // rename or re-create) is asked again by server 0's id.
        // Answers that disagree (a server missed a step) are repaired
        // before the answer is given: server 0's wins.
        let mut all = self.on_all(|s| s.lookup(parent, name)).await;
        if heal::disagree(&all) {
            self.heal_name(parent, name, &all[1..]).await;
        }
        let first = all.remove(0)?;
        self.dirs.note(&first);
        if first.kind != FileKind::File || self.subvols.len() == 1 {
            return Ok(first);
        }
        let at = Loc { path: parent.child(name).path, fid: Some(first.fid) };
        let mut merged = vec![first.clone()];
        for (s, r) in self.rest().iter().zip(all) {
            merged.push(match r {
                Ok(a) if a.fid == first.fid => a,
                _ => s.getattr(&at).await?,
            });
        }
        merge_attrs(merged)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        if self.dirs.is_dir(loc.fid) {
            return self.first().getattr(loc).await;
        }
        let a = merge_attrs(all_ok(self.on_all(|s| s.getattr(loc)).await)?)?;
        self.dirs.note(&a);
        Ok(a)
    }

    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        // A truncate sets every copy to the new size: the copies stay sparse
        // and the largest one (the merged size) is exactly the new size.
        let all = self.on_all(|s| s.setattr(loc, set)).await;
        if (set.perm.is_some() || set.uid.is_some() || set.gid.is_some()) && all.iter().any(|r| r.is_err()) {
            // a copy that missed a chmod or chown (heal_attrs)
            self.pending.record_path("setattr", &loc.path);
        }
        merge_attrs(all_ok(all)?)
    }

    async fn readlink(&self, loc: &Loc) -> FsResult<String> {
        self.first().readlink(loc).await
    }

    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        self.make_everywhere(parent, new, false, |s| s.mknod(parent, new, mode, rdev)).await
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        let m = self.make_everywhere(parent, new, true, |s| s.mkdir(parent, new)).await?;
        self.dirs.note(&m.attr);
        Ok(m)
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        self.create_everywhere(parent, new, flags).await
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        self.make_everywhere(parent, new, false, |s| s.symlink(parent, new, target)).await
    }

    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        // The object exists: server 0 first (it may refuse), then the others.
        let first = self.unanswered("link", newparent, newname, self.first().link(loc, newparent, newname).await)?;
        let linked = first.attr.fid;
        let rest = join_all(self.rest().iter().enumerate().map(|(k, s)| {
            self.follow(k + 1, newparent, newname, linked, || s.link(loc, newparent, newname), false)
        }))
        .await;
        self.finish_create(newparent, newname, false, first, rest).await
    }

    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let first = self.unanswered("unlink", parent, name, self.first().unlink(parent, name).await)?;
        let rest = gone_is_done(self.on_rest(|s| s.unlink(parent, name)).await);
        self.note_partial("unlink", parent, name, &rest);
        let rest = all_ok(rest)?;
        let dir = self.removed_dir_after(parent, &first, &rest);
        Ok(Removed { dir, ..merge_removed(first, rest.into_iter().flatten().collect())? })
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let first = self.unanswered("rmdir", parent, name, self.first().rmdir(parent, name).await)?;
        let rest = gone_is_done(self.on_rest(|s| s.rmdir(parent, name)).await);
        self.note_partial("rmdir", parent, name, &rest);
        let rest = all_ok(rest)?;
        let dir = self.removed_dir_after(parent, &first, &rest);
        Ok(Removed { dir, ..first })
    }

    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        let first = self.first().rename(parent, name, newparent, newname, flags).await;
        let first = self.unanswered("rename", newparent, newname, self.unanswered("rename", parent, name, first))?;
        let rest = self.on_rest(|s| s.rename(parent, name, newparent, newname, flags)).await;
        let rest = self.settle_rename(newparent, newname, first.moved, rest).await;
        if self.note_partial("rename", parent, name, &rest) {
            self.pending.record("rename", newparent, newname);
        }
        let rest = all_ok(rest)?;
        let dir = self.dir_after(parent, std::iter::once(&first).chain(&rest).map(|r| r.dir.clone()).collect());
        let newdir = self.dir_after(newparent, std::iter::once(&first).chain(&rest).map(|r| r.newdir.clone()).collect());
        let copies = std::iter::once(&first).chain(&rest).map(|r| r.moved_attr.clone()).collect();
        let moved_attr = merge_after_change(copies, self.dirs.is_dir(Some(first.moved)));
        let replaced = match first.replaced {
            Some(r) => Some(merge_removed(r, rest.into_iter().filter_map(|x| x.replaced).collect())?),
            None => None,
        };
        Ok(Renamed { moved: first.moved, replaced, dir, newdir, moved_attr })
    }

    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        let all = self.on_all(|s| s.open(loc, flags)).await;
        if all.iter().any(|r| r.is_err()) {
            // The gateway sends no release for an open that failed: the
            // servers that counted it let go now, or a removed file would
            // keep its space there until this gateway is gone.
            join_all(self.subvols.iter().zip(&all).filter(|(_, r)| r.is_ok()).map(|(s, _)| s.release(loc))).await;
        }
        all_ok(all).map(drop)
    }

    async fn release(&self, loc: &Loc) -> FsResult<()> {
        all_ok(self.on_all(|s| s.release(loc)).await).map(drop)
    }

    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        if self.subvols.len() == 1 {
            return self.first().read(loc, offset, size).await;
        }
        let pieces = layout::pieces(offset, size as usize, self.unit, self.subvols.len());
        let got = all_ok(join_all(pieces.iter().map(|p| self.subvols[p.server].read(loc, p.offset, p.len as u32))).await)?;
        let last_full = match (pieces.last(), got.last()) {
            (Some(p), Some(d)) => d.len() >= p.len,
            _ => return Ok(Bytes::new()),
        };
        // Bytes that some server really returned end here; a short piece is a
        // hole when a later byte exists, or the end of the file otherwise.
        let data_end =
            pieces.iter().zip(&got).filter(|(_, d)| !d.is_empty()).map(|(p, d)| p.buf_off + d.len()).max().unwrap_or(0);
        let len = if last_full {
            size as usize
        } else {
            // Which servers hold bytes past this range is unknown: ask them all.
            let attr = Translator::getattr(self, loc).await?;
            (attr.size.saturating_sub(offset).min(u64::from(size)) as usize).max(data_end)
        };
        if pieces.len() == 1 && len <= got[0].len() {
            return Ok(got.into_iter().next().unwrap_or_default().slice(..len));
        }
        let mut buf = BytesMut::zeroed(len);
        for (p, d) in pieces.iter().zip(&got) {
            if p.buf_off >= len {
                break;
            }
            let n = d.len().min(len - p.buf_off);
            buf[p.buf_off..p.buf_off + n].copy_from_slice(&d[..n]);
        }
        Ok(buf.freeze())
    }

    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        if self.subvols.len() == 1 {
            return self.first().write(loc, offset, data).await;
        }
        write::write(self, loc, offset, data).await
    }

    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        self.fallocate_striped(loc, mode, ranges).await
    }

    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        copy_range::copy_range(self, src, dst, ranges).await
    }

    async fn flush(&self, loc: &Loc) -> FsResult<()> {
        all_ok(self.on_all(|s| s.flush(loc)).await).map(drop)
    }

    async fn fsync(&self, loc: &Loc, datasync: bool) -> FsResult<()> {
        all_ok(self.on_all(|s| s.fsync(loc, datasync)).await).map(drop)
    }

    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        let mut entries = self.first().readdir(loc, cookie, max, plus).await?;
        if plus && self.subvols.len() > 1 {
            // Server 0's attributes of a file are only its own copy's.
            merged_listing::merge_listing(self, loc, &mut entries).await?;
        }
        Ok(entries)
    }

    /// Listings come from server 0 (as `readdir`'s).
    /// Not offered above stripe: its own listing asks each server for its
    /// copies (`merged_listing`), and a caller without it falls back to
    /// getattr (ENOSYS is what such callers expect).
    async fn getattrs(&self, _locs: &[Loc]) -> FsResult<Vec<Option<Attr>>> {
        Err(FsError::ENOSYS)
    }

    async fn names(&self, loc: &Loc, cookie: u64, max: u32) -> FsResult<Vec<DirName>> {
        self.first().names(loc, cookie, max).await
    }

    async fn statfs(&self, loc: &Loc) -> FsResult<StatFs> {
        merge_statfs(all_ok(self.on_all(|s| s.statfs(loc)).await)?)
    }

    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        if name == HEAL_XATTR {
            // Not stored: the walk's outcome. EAGAIN: something is left.
            let r = self.heal_tree(loc).await;
            return if r.left == 0 { Ok(()) } else { Err(FsError(libc::EAGAIN)) };
        }
        all_ok(self.on_all(|s| s.setxattr(loc, name, value, flags)).await).map(drop)
    }

    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        self.first().getxattr(loc, name).await
    }

    async fn listxattr(&self, loc: &Loc) -> FsResult<Vec<String>> {
        self.first().listxattr(loc).await
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        all_ok(self.on_all(|s| s.removexattr(loc, name)).await).map(drop)
    }

    async fn getlk(&self, loc: &Loc, lock: &Lock) -> FsResult<Lock> {
        self.orderer(loc).getlk(loc, lock).await
    }

    async fn setlk(&self, loc: &Loc, lock: &Lock, wait: bool) -> FsResult<()> {
        self.orderer(loc).setlk(loc, lock, wait).await
    }
}

/// A follower's removal that finds the name gone did what server 0 did (a
/// heal removed it first).
fn gone_is_done<T>(rest: Vec<FsResult<T>>) -> Vec<FsResult<Option<T>>> {
    rest.into_iter()
        .map(|r| match r {
            Ok(x) => Ok(Some(x)),
            Err(FsError::ENOENT) => Ok(None),
            Err(e) => Err(e),
        })
        .collect()
}

impl Stripe {
    /// [`Stripe::dir_after`] of a removal: a follower that found the name
    /// gone (`None`: a heal removed it) gave no copy.
    fn removed_dir_after(&self, parent: &Loc, first: &Removed, rest: &[Option<Removed>]) -> Option<Attr> {
        let copies = std::iter::once(first.dir.clone()).chain(rest.iter().map(|r| r.as_ref().and_then(|r| r.dir.clone())));
        self.dir_after(parent, copies.collect())
    }
}

/// A removed file that keeps other links has merged remaining attributes
/// (the directory's are the caller's to merge).
fn merge_removed(first: Removed, rest: Vec<Removed>) -> FsResult<Removed> {
    let remaining = match first.remaining {
        Some(a) => {
            let mut all = vec![a];
            all.extend(rest.into_iter().filter_map(|r| r.remaining));
            Some(merge_attrs(all)?)
        }
        None => None,
    };
    Ok(Removed { fid: first.fid, remaining, dir: None })
}
