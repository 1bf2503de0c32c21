//! Repair of a follower that missed a namespace step.
//!
//! ```text
//!  lookup ──> every server ──> answers disagree? ──> heal_name ──> follower i: remove / create / link / rename
//!  setxattr trusted.imca.heal ──> walk (walk.rs) ──> heal_name for every name any server lists
//!  an operation failed on a follower ──> index (pending.rs) ──> healer.rs ──> heal_name, in the background
//! ```
//!
//! Server 0 orders the namespace: every create, removal and rename is applied
//! there first and only then on the followers (servers 1..S), so when they
//! disagree, server 0 holds the outcome. An operation that was acknowledged
//! succeeded on every server; one that failed half-way (a follower crashed
//! or was unreachable) returned an error to its caller, so server 0's state
//! may win without losing anything acknowledged. Repair therefore only ever
//! changes a follower:
//!
//! * a name server 0 has and the follower lacks (or holds with another id or
//!   type) is made on the follower with server 0's id, type, permissions and
//!   owner — by a hard link when the follower still holds that id under
//!   another name (a rename it missed: its stripe units of the file live
//!   there and are kept), by a rename for a directory it holds elsewhere,
//!   else created empty (its units of a file that never reached it are holes);
//! * a name server 0 lacks (an unlink, rmdir or rename it missed) is removed
//!   on the follower — unless it may be a create still on its way to server
//!   0 (new and untouched, `maybe_in_flight`: creates ask every server at
//!   once), or unless server 0 still knows that object's id and the
//!   follower holds it under no other name: then the follower's units of
//!   the file would go with it, so the name is left until the name server 0
//!   uses has been linked (the walk's next pass);
//! * a name that holds the same object everywhere, but whose follower copy
//!   missed a chmod or chown, gets server 0's mode and owner
//!   ([`crate::heal_attrs`]; times are not repaired, see there).
//!
//! Every decision is taken on a second look at server 0 made after the
//! follower answered: a removal or rename of another gateway that is
//! between servers is then already visible on server 0 (it goes first), so
//! the heal never removes what that operation is about to finish; a create,
//! which reaches every server at once, is covered by the exception above.
//! The followers' steps of such an operation accept what a heal already
//! did (`follow` in create.rs, `settle_rename` in lib.rs). A heal is one attempt per name and meeting; a
//! server that keeps disagreeing is logged. The background heal of names an
//! operation recorded (`healer.rs`) retries, at most `MAX_ATTEMPTS` times.

use crate::{heal_attrs, Fut, Stripe};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use xlator::*;

/// What a heal did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealReport {
    /// names looked at on every server
    pub checked: u64,
    /// follower entries changed to agree with server 0
    pub repaired: u64,
    /// disagreements left (deferred to a later pass, or a step failed)
    pub left: u64,
    /// of those, follower-only objects left because they may be creates
    /// still on their way to server 0 (see `maybe_in_flight`)
    pub young: u64,
}

impl HealReport {
    pub fn add(&mut self, o: HealReport) {
        self.checked += o.checked;
        self.repaired += o.repaired;
        self.left += o.left;
        self.young += o.young;
    }
}

/// How deep a follower-only directory tree is emptied before giving up.
const MAX_STRAY_DEPTH: usize = 64;
/// How many half-seen directory moves are remembered.
const MOVES: usize = 4096;
/// Listing page asked of a server.
pub(crate) const PAGE: u32 = 1024;
/// Most names the heal takes from one server's listing of one directory
/// (a server that lists without end must not grow the gateway's memory).
pub const MAX_LISTED: usize = 4 << 20;

/// One half of a directory move a follower missed: where it still has the
/// directory, or where server 0 has it. When both are known it is renamed.
#[derive(Clone, Debug)]
enum Half {
    Stale(Loc, String),
    Wanted(Loc, String),
}

pub(crate) struct Moves(Mutex<LruCache<(usize, FileId), Half>>);

impl Moves {
    pub fn new() -> Moves {
        Moves(Mutex::new(LruCache::new(NonZeroUsize::new(MOVES).unwrap_or(NonZeroUsize::MIN))))
    }

    /// Note one half; the pair (from, to) when the other half is known.
    fn meet(&self, server: usize, fid: FileId, half: Half) -> Option<((Loc, String), (Loc, String))> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match (m.peek(&(server, fid)).cloned(), half) {
            (Some(Half::Wanted(tp, tn)), Half::Stale(fp, fnm)) | (Some(Half::Stale(fp, fnm)), Half::Wanted(tp, tn)) => {
                m.pop(&(server, fid));
                Some(((fp, fnm), (tp, tn)))
            }
            (_, h) => {
                m.put((server, fid), h);
                None
            }
        }
    }
}

/// Do the servers' answers for one name disagree (ignoring servers that
/// could not answer at all)?
pub(crate) fn disagree(all: &[FsResult<Attr>]) -> bool {
    let Some((first, rest)) = all.split_first() else {
        return false;
    };
    rest.iter().any(|r| match (first, r) {
        (Ok(f), Ok(a)) => !same(f, a) || heal_attrs::differs(f, a),
        (Ok(_), Err(FsError::ENOENT)) | (Err(FsError::ENOENT), Ok(_)) => true,
        _ => false,
    })
}

fn same(a: &Attr, b: &Attr) -> bool {
    a.fid == b.fid && a.kind == b.kind
}

enum Outcome {
    Agrees,
    Repaired,
    Left,
    /// left: maybe a create still on its way to server 0
    Young,
}

/// Whether follower object `a`, which server 0 lacks, may be a create
/// still on its way to server 0 (creates ask every server at once, see
/// `create`): it is pristine — its access and modification times are still
/// those of its creation, so nothing read or wrote it, as anyone told of
/// the create might have — and younger than `grace`. Server 0's answer to
/// such a create is waited for at most [`crate::IN_FLIGHT`], so an older
/// one can no longer be acknowledged. (Clocks of the gateway and the
/// servers are assumed within a few seconds of each other.)
pub(crate) fn maybe_in_flight(a: &Attr, grace: Duration) -> bool {
    let made = UNIX_EPOCH + Duration::new(a.mtime.secs.max(0) as u64, a.mtime.nsecs);
    a.atime == a.mtime && SystemTime::now().duration_since(made).map_or(true, |age| age < grace)
}

impl Stripe {
    /// Make every follower whose answer `rest[k]` (server k+1) disagrees with
    /// server 0 about `parent/name` agree with it. One attempt each.
    pub(crate) async fn heal_name(&self, parent: &Loc, name: &str, rest: &[FsResult<Attr>]) -> HealReport {
        let mut report = HealReport::default();
        let mut now0 = None;
        for (k, theirs) in rest.iter().enumerate() {
            let i = k + 1;
            if !matches!(theirs, Ok(_) | Err(FsError::ENOENT)) {
                continue;
            }
            // The second look at server 0 (see the module page).
            if now0.is_none() {
                now0 = Some(self.first().lookup(parent, name).await);
            }
            let ours = now0.as_ref().unwrap_or_else(|| unreachable!());
            let path = parent.child(name).path;
            match self.heal_one(i, parent, name, ours, theirs).await {
                Ok(Outcome::Agrees) => {}
                Ok(Outcome::Repaired) => {
                    tracing::warn!(server = i, %path, "stripe heal: repaired a follower that missed a namespace step or a setattr");
                    report.repaired += 1;
                }
                Ok(Outcome::Left) => {
                    tracing::info!(server = i, %path, "stripe heal: disagreement left for a later pass");
                    report.left += 1;
                }
                Ok(Outcome::Young) => {
                    tracing::info!(server = i, %path, "stripe heal: a new follower-only name left (maybe a create under way)");
                    report.left += 1;
                    report.young += 1;
                }
                Err(e) => {
                    tracing::error!(server = i, %path, ?e, "stripe heal: repair failed; servers still differ");
                    report.left += 1;
                }
            }
        }
        report
    }

    async fn heal_one(
        &self,
        i: usize,
        parent: &Loc,
        name: &str,
        ours: &FsResult<Attr>,
        theirs: &FsResult<Attr>,
    ) -> FsResult<Outcome> {
        match (ours, theirs) {
            (Ok(f), Ok(a)) if same(f, a) && !heal_attrs::differs(f, a) => Ok(Outcome::Agrees),
            (Ok(f), Ok(a)) if same(f, a) => {
                Ok(if self.copy_mode_owner(i, parent, name, f, a).await? { Outcome::Repaired } else { Outcome::Left })
            }
            (Ok(f), Ok(a)) => {
                if !self.remove_stray(i, parent, name, a.clone(), 0).await? {
                    return Ok(Outcome::Left);
                }
                self.make(i, parent, name, f).await
            }
            (Ok(f), Err(FsError::ENOENT)) => self.make(i, parent, name, f).await,
            (Err(FsError::ENOENT), Ok(a)) if maybe_in_flight(a, self.heal_grace) => Ok(Outcome::Young),
            (Err(FsError::ENOENT), Ok(a)) => {
                Ok(if self.remove_stray(i, parent, name, a.clone(), 0).await? { Outcome::Repaired } else { Outcome::Left })
            }
            _ => Ok(Outcome::Agrees),
        }
    }

    /// Remove `parent/name` (object `a`) from follower `i`, where server 0
    /// does not have it under that name. False: left in place (see the
    /// module page), or a directory that could not be emptied.
    pub(crate) fn remove_stray<'a>(&'a self, i: usize, parent: &'a Loc, name: &'a str, a: Attr, depth: usize) -> Fut<'a, bool> {
        Box::pin(async move {
            let s = &self.subvols[i];
            let at = Loc { path: parent.child(name).path, fid: Some(a.fid) };
            let known = match self.first().getattr(&Loc { path: String::new(), fid: Some(a.fid) }).await {
                // (an unlinked file still open is no longer known)
                Ok(k) => Some(k).filter(|k| k.nlink > 0),
                Err(FsError::ENOENT) | Err(FsError::ESTALE) => None,
                Err(e) => return Err(e),
            };
            if a.kind != FileKind::Dir {
                if known.is_some() && a.nlink <= 1 {
                    // Server 0 has this file under another name, this
                    // follower only here: its units would go with it.
                    return Ok(false);
                }
                return self.unlink_if(i, parent, name, a.fid).await;
            }
            if known.is_some_and(|k| k.kind == FileKind::Dir) {
                return self.move_dir(i, a.fid, Half::Stale(parent.clone(), name.to_string())).await;
            }
            match s.rmdir(parent, name).await {
                Err(FsError::ENOTEMPTY) if depth < MAX_STRAY_DEPTH => {}
                r => return ok_or_gone(r),
            }
            // A follower-only tree: its entries are strays too.
            for e in list(s, &at).await? {
                match s.lookup(&at, &e).await {
                    Ok(child) => {
                        self.remove_stray(i, &at, &e, child, depth + 1).await?;
                    }
                    Err(FsError::ENOENT) => {}
                    Err(err) => return Err(err),
                }
            }
            match s.rmdir(parent, name).await {
                Err(FsError::ENOTEMPTY) => Ok(false),
                r => ok_or_gone(r),
            }
        })
    }

    /// Unlink follower `i`'s `parent/name` if it still holds object `fid`.
    ///
    /// By name alone this would race the follower's own step of an
    /// operation between servers: a rename that server 0 finished, arriving
    /// here between the heal's look and its unlink, puts the renamed object
    /// under the name, and the heal would remove that file's units here.
    /// So the name is first renamed aside, to a name only the heal of that
    /// object uses: the rename answers which object moved (the server does
    /// it in one step). The object meant is unlinked there; any other goes
    /// back under its name. (Listings come from server 0: the aside name is
    /// seen by no application.)
    async fn unlink_if(&self, i: usize, parent: &Loc, name: &str, fid: FileId) -> FsResult<bool> {
        let s = &self.subvols[i];
        let aside = aside_name(fid);
        if name == aside {
            // (a heal that stopped half-way: its walk finds the name)
            return ok_or_gone(s.unlink(parent, name).await);
        }
        let flags = RenameFlags { noreplace: true, exchange: false };
        let moved = match s.rename(parent, name, parent, &aside, flags).await {
            Ok(r) => r.moved,
            Err(FsError::ENOENT) => return Ok(true),
            Err(e) => {
                // A rename whose answer was lost (a timeout) may be done
                // all the same: the aside name goes to the background heal.
                self.pending.record("heal", parent, &aside);
                return Err(e);
            }
        };
        if moved == fid {
            let r = ok_or_gone(s.unlink(parent, &aside).await);
            if r.is_err() {
                // The name users knew agrees now; this one is what is left.
                self.pending.record("heal", parent, &aside);
            }
            return r;
        }
        tracing::info!(server = i, path = %parent.child(name).path, "stripe heal: the name changed under the heal; put back");
        match s.rename(parent, &aside, parent, name, flags).await {
            Ok(_) => Ok(false),
            // Made again meanwhile (another gateway's heal linked the same
            // object there): the aside name is a second one.
            Err(FsError::EEXIST) if s.lookup(parent, name).await.is_ok_and(|a| a.fid == moved) => {
                ok_or_gone(s.unlink(parent, &aside).await).map(|_| false)
            }
            Err(e) => Err(e),
        }
    }

    /// Make server 0's object `f` at `parent/name` on follower `i`, which
    /// has nothing under that name.
    async fn make(&self, i: usize, parent: &Loc, name: &str, f: &Attr) -> FsResult<Outcome> {
        let s = &self.subvols[i];
        let at = Loc { path: parent.child(name).path, fid: Some(f.fid) };
        match s.getattr(&Loc { path: String::new(), fid: Some(f.fid) }).await {
            Ok(a) if a.kind == FileKind::Dir => {
                let moved = self.move_dir(i, f.fid, Half::Wanted(parent.clone(), name.to_string())).await?;
                return Ok(if moved { Outcome::Repaired } else { Outcome::Left });
            }
            Ok(a) if a.kind == f.kind => {
                // A rename this follower missed: keep its units, add the name.
                return match s.link(&at, parent, name).await {
                    Ok(_) => Ok(Outcome::Repaired),
                    Err(FsError::EEXIST) => Ok(self.made_meanwhile(i, parent, name, f.fid).await),
                    Err(e) => Err(e),
                };
            }
            Ok(_) => return Ok(Outcome::Left),
            Err(FsError::ENOENT) | Err(FsError::ESTALE) => {}
            Err(e) => return Err(e),
        }
        let new = NewFile {
            name: name.to_string(),
            fid: f.fid,
            perm: f.perm,
            owner: Owner { uid: f.uid, gid: f.gid },
            exclusive: true,
        };
        let made = match f.kind {
            FileKind::File => match s.create(parent, &new, libc::O_RDWR).await {
                Ok(_) => {
                    // create counts an open; this one is not a gateway's
                    let _ = s.release(&at).await;
                    Ok(())
                }
                Err(e) => Err(e),
            },
            FileKind::Dir => s.mkdir(parent, &new).await.map(drop),
            FileKind::Symlink => {
                let target = self.first().readlink(&at).await?;
                s.symlink(parent, &new, &target).await.map(drop)
            }
            k => s.mknod(parent, &new, kind_bits(k) | f.perm, f.rdev).await.map(drop),
        };
        match made {
            Ok(()) => Ok(Outcome::Repaired),
            Err(FsError::EEXIST) => Ok(self.made_meanwhile(i, parent, name, f.fid).await),
            Err(e) => Err(e),
        }
    }

    /// The name a heal was making on follower `i` was taken meanwhile: by
    /// the follower step of the create itself (two gateways creating the
    /// name at once) or another heal, which agrees if it holds `fid`.
    async fn made_meanwhile(&self, i: usize, parent: &Loc, name: &str, fid: FileId) -> Outcome {
        match self.subvols[i].lookup(parent, name).await {
            Ok(a) if a.fid == fid => Outcome::Agrees,
            _ => Outcome::Left,
        }
    }

    /// One half of a directory move follower `i` missed; the rename once
    /// both halves were met (in any order, by lookups or the walk).
    async fn move_dir(&self, i: usize, fid: FileId, half: Half) -> FsResult<bool> {
        let Some(((fp, fname), (tp, tname))) = self.moves.meet(i, fid, half) else {
            return Ok(false);
        };
        let flags = RenameFlags { noreplace: true, exchange: false };
        self.subvols[i].rename(&fp, &fname, &tp, &tname, flags).await?;
        Ok(true)
    }
}

/// Where [`Stripe::unlink_if`] puts a follower's name of object `fid`
/// before it knows which object that is.
fn aside_name(fid: FileId) -> String {
    format!(".imca-heal-{:032x}", fid.0)
}

/// A removal that finds the name already gone did what it was asked.
fn ok_or_gone<T>(r: FsResult<T>) -> FsResult<bool> {
    match r {
        Ok(_) | Err(FsError::ENOENT) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Every name in directory `dir` on one server.
pub(crate) async fn list(s: &Next, dir: &Loc) -> FsResult<Vec<String>> {
    let mut names = Vec::new();
    let mut cookie = 0;
    loop {
        let page = s.readdir(dir, cookie, PAGE, false).await?;
        let Some(last) = page.last() else { break };
        if last.next == cookie {
            break; // a server that does not move on would loop forever
        }
        cookie = last.next;
        names.extend(page.into_iter().map(|e| e.name).filter(|n| n != "." && n != ".."));
        if names.len() > MAX_LISTED {
            tracing::error!(path = %dir.path, "stripe heal: a server lists more than {MAX_LISTED} names; not healed");
            return Err(FsError::EIO);
        }
    }
    Ok(names)
}

fn kind_bits(k: FileKind) -> u32 {
    match k {
        FileKind::Fifo => libc::S_IFIFO,
        FileKind::Socket => libc::S_IFSOCK,
        FileKind::CharDev => libc::S_IFCHR,
        FileKind::BlockDev => libc::S_IFBLK,
        FileKind::Dir => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
        FileKind::File => libc::S_IFREG,
    }
}
