//! What the gateway handed its kernel, remembered, so that a re-validation
//! is answered here instead of by the storage servers.
//!
//! An entry or attribute TTL given to the kernel never outlives the lease
//! left when it is given (≤ one lease, 1 s by default), so a walk over more
//! names than fit in a lease looks them all up again, a network round trip
//! each, although the lease was renewed all along and nothing changed. What
//! the servers answered stays true for as long as the lease is held and
//! nothing about it is called back: the same rule that lets the kernel
//! cache it. So the gateway keeps the entries and attributes it answered
//! with, and answers the kernel's LOOKUP and GETATTR from them.
//!
//! What makes a remembered answer go:
//! - a callback for it (an inode: its attributes; an entry: the name), or
//!   one that drops everything (a server restarted);
//! - a lease that lapsed (checked when it is renewed: while lapsed nothing
//!   is served, and on renewal everything is forgotten, since callbacks
//!   were not waited for meanwhile);
//! - a change made through this gateway (servers do not call back the
//!   gateway that asked): a write or setattr forgets its inode, a namespace
//!   change what it touches, before it is sent and again once answered.
//!   A setattr's answer is the inode's attributes after it, and a write's
//!   gives them from those before (`WriteReply::attr_after`): the answer
//!   replaces what was forgotten, if nothing moved meanwhile.
//!
//! Every forget moves an epoch, and an answer is remembered only if the
//! epoch did not move while it was being fetched (it may predate the
//! change).
//!
//! A directory this gateway made is *complete* while nothing about it was
//! called back: every name in it was created here and is remembered, so a
//! name not remembered does not exist and its LOOKUP (the one before every
//! create: an untar asks it for each entry) is answered ENOENT here. Another
//! gateway's create in it calls back the directory's attributes before it
//! is acknowledged, which ends the completeness, as does anything that
//! forgets one of its names, and a create here whose answer could not be
//! remembered.
//!
//! The bytes of small files written here go with their attributes (see
//! `small_files`).

use crate::small_files::SmallFiles;
use crate::memo_names::MemoNames;
use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use xlator::Attr;

/// How many inodes or entries are remembered before about half of them
/// are forgotten (see `Inner::make_room`).
const MAX_ITEMS: usize = 200_000;

/// How many of the latest forgets are kept by inode (see `Inner::recent`).
const RECENT: usize = 256;

/// In `Inner::recent`: a forget of everything.
const ALL: u64 = 0;

/// Remembered attributes, with the memo's clock when they were last
/// stored or answered with.
struct Kept {
    attr: Attr,
    used: u64,
}

#[derive(Default)]
struct Inner {
    epoch: u64,
    /// the latest forgets, oldest first, as (the epoch they moved to, the
    /// inode whose attributes went, or [`ALL`]): see `Memo::store_ahead`
    recent: VecDeque<(u64, u64)>,
    /// moves at every store and every answer (see `Inner::make_room`)
    clock: u64,
    attrs: HashMap<u64, Kept>,
    entries: MemoNames,
    /// which [`Asked`] xattrs an inode is known to lack (a bit each)
    lacks: HashMap<u64, u8>,
    /// directories whose every name is in `entries` (see the module doc)
    complete: HashSet<u64>,
    /// small files' bytes, only for inodes in `attrs` (see `small_files`)
    contents: SmallFiles,
}

impl Inner {
    /// Move the epoch for a forget of `inos`' attributes (or of [`ALL`]).
    fn moved(&mut self, inos: &[u64]) {
        self.epoch += 1;
        for ino in inos {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent.push_back((self.epoch, *ino));
        }
    }

    /// Whether `ino`'s attributes may have been forgotten since epoch `t`
    /// (a forget of it or of everything, or more forgets than are kept),
    /// not counting the one that moved the epoch to `own` (a change's own,
    /// once answered: see [`Memo::store_after_change`]).
    fn forgotten_since(&self, t: u64, ino: u64, own: Option<u64>) -> bool {
        // the first move after `t` went to epoch t + 1: it must be kept
        let known_from = self.recent.front().map_or(self.epoch, |(e, _)| *e);
        if self.epoch != t && known_from > t + 1 {
            return true;
        }
        self.recent.iter().any(|&(e, i)| e > t && Some(e) != own && (i == ino || i == ALL))
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// At the bound, forget the half of what is remembered that was used
    /// longest ago. Starting over sends the next walk of a big tree to the
    /// servers for every name at once (5,840 stats/s against 80,000+), and
    /// forgetting at random does it for half the names of the directory in
    /// use (the pass after the bound: 36,870 stats/s, stat-ahead catching
    /// it after 4 misses; docs/benchmarks/archive/issue-12-kernel-caching.md, stop 21).
    /// Any answer may be forgotten at any time; what must still hold is
    /// that a complete directory holds every name of it, and that bytes go
    /// only with their attributes.
    fn make_room(&mut self) {
        if self.attrs.len() >= MAX_ITEMS {
            let mut used: Vec<u64> = self.attrs.values().map(|k| k.used).collect();
            let mid = used.len() / 2;
            let cut = *used.select_nth_unstable(mid).1;
            let contents = &mut self.contents;
            self.attrs.retain(|ino, k| {
                let keep = k.used > cut;
                if !keep {
                    contents.remove(*ino);
                }
                keep
            });
        }
        if self.entries.len() >= MAX_ITEMS {
            for dir in self.entries.shed(MAX_ITEMS / 2) {
                self.complete.remove(&dir);
            }
        }
        if self.complete.len() >= MAX_ITEMS {
            self.complete.clear();
        }
    }

    /// Remember `a`; bytes remembered for another size or mtime go.
    fn set_attr(&mut self, a: &Attr) {
        let ino = a.fid.ino();
        if let Some(old) = self.keep(ino, a) {
            if (old.size, old.mtime) == (a.size, a.mtime) {
                return;
            }
        }
        self.contents.remove(ino);
    }

    /// Remember `a` for `ino` as used now; hands back what it replaced.
    fn keep(&mut self, ino: u64, a: &Attr) -> Option<Attr> {
        let used = self.tick();
        self.attrs.insert(ino, Kept { attr: a.clone(), used }).map(|k| k.attr)
    }

    /// The attributes remembered for `ino`, which count as used at `now`.
    fn use_attr(&mut self, ino: u64, now: u64) -> Option<Attr> {
        let k = self.attrs.get_mut(&ino)?;
        k.used = now;
        Some(k.attr.clone())
    }

    fn drop_attrs(&mut self, ino: u64) -> Option<Attr> {
        self.contents.remove(ino);
        self.attrs.remove(&ino).map(|k| k.attr)
    }
}

/// The extended attributes whose absence the memo keeps: asked of every
/// file, almost always to hear "none" — `security.capability` by the
/// kernel before every write (a write drops it), `security.selinux` by
/// `ls -l` (and `ls -Z`, `stat` with SELinux-aware coreutils) for every
/// name it lists: 2,000 round trips for `ls -l` of 2,000 files.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Asked {
    Capability = 1,
    Selinux = 2,
}

impl Asked {
    pub fn of(name: &str) -> Option<Asked> {
        match name {
            "security.capability" => Some(Asked::Capability),
            "security.selinux" => Some(Asked::Selinux),
            _ => None,
        }
    }
}

/// What [`Memo::take_attrs`] hands back: what was remembered of an inode
/// before a change here, and the ticket [`Memo::store_changed`] takes.
pub struct Taken {
    pub attr: Option<Attr>,
    pub content: Option<Bytes>,
    pub ticket: MemoTicket,
}

/// A removal through this gateway under way (see [`Memo::removing`]).
pub struct Removing {
    parent: u64,
    /// `parent` was complete when it began
    complete: bool,
    /// the epoch just after its forgets
    ticket: MemoTicket,
}

/// What a rename put in a directory (see [`Memo::removed`]): the new
/// name, the inode it names, and its attributes as the answer carried them.
#[derive(Clone, Copy)]
pub struct MovedIn<'a> {
    pub name: &'a str,
    pub ino: u64,
    pub attr: Option<&'a Attr>,
}

/// The remembered answers (see the module doc).
#[derive(Default)]
pub struct Memo {
    inner: Mutex<Inner>,
}

/// The memo's epoch when a request started.
#[derive(Clone, Copy, Debug)]
pub struct MemoTicket(u64);

impl Memo {
    pub fn ticket(&self) -> MemoTicket {
        MemoTicket(self.inner.lock().unwrap().epoch)
    }

    /// The attributes remembered for inode `ino`.
    pub fn attr(&self, ino: u64) -> Option<Attr> {
        let mut m = self.inner.lock().unwrap();
        let now = m.tick();
        m.use_attr(ino, now)
    }

    /// The attributes of what `name` in directory `parent` names.
    pub fn entry(&self, parent: u64, name: &str) -> Option<Attr> {
        let mut m = self.inner.lock().unwrap();
        let now = m.tick();
        let ino = m.entries.get(parent, name, now)?;
        m.use_attr(ino, now)
    }

    /// The bytes remembered for inode `ino` (all of the file).
    pub fn content(&self, ino: u64) -> Option<Bytes> {
        let m = self.inner.lock().unwrap();
        let (a, d) = (&m.attrs.get(&ino)?.attr, m.contents.get(ino)?);
        (a.size == d.len() as u64).then(|| d.clone())
    }

    /// Whether `name` is known not to exist in directory `parent` (it is
    /// complete and does not hold the name).
    pub fn absent(&self, parent: u64, name: &str) -> bool {
        let mut m = self.inner.lock().unwrap();
        let now = m.tick();
        m.complete.contains(&parent) && m.entries.get(parent, name, now).is_none()
    }

    /// Whether inode `ino` is remembered to lack xattr `x`.
    pub fn lacks(&self, ino: u64, x: Asked) -> bool {
        self.inner.lock().unwrap().lacks.get(&ino).is_some_and(|b| b & x as u8 != 0)
    }

    /// Remember that inode `ino` lacks `x` (a request started with `t`).
    pub fn store_lack(&self, t: MemoTicket, ino: u64, x: Asked) {
        let mut m = self.inner.lock().unwrap();
        if m.epoch != t.0 {
            return;
        }
        if m.lacks.len() >= MAX_ITEMS {
            m.lacks.clear();
        }
        *m.lacks.entry(ino).or_default() |= x as u8;
    }

    /// Remember `a`, fetched by a request that started with `t`.
    pub fn store_attr(&self, t: MemoTicket, a: &Attr) {
        let mut m = self.inner.lock().unwrap();
        if m.epoch != t.0 {
            return;
        }
        m.make_room();
        m.set_attr(a);
    }

    /// Remember `a`, fetched ahead by a request that started with `t`,
    /// unless its inode's attributes were forgotten since: unlike
    /// [`Memo::store_attr`], changes to other inodes meanwhile do not void
    /// it. A directory's attributes fetched right after a create here
    /// would otherwise almost never be kept, since the write that follows
    /// the create moves the epoch. False if not stored (or if the forgets
    /// since `t` are no longer all known).
    pub fn store_ahead(&self, t: MemoTicket, a: &Attr) -> bool {
        let mut m = self.inner.lock().unwrap();
        if m.forgotten_since(t.0, a.fid.ino(), None) {
            return false;
        }
        m.make_room();
        m.set_attr(a);
        true
    }

    /// Remember `a`, a directory's attributes just after a change in it
    /// here, carried by the change's answer: as [`Memo::store_ahead`] for
    /// a change sent at `t` (just after its own forgets), except that the
    /// forget the change made once answered (which moved the epoch to
    /// `own`: see [`Memo::forget_attrs`]) does not void it.
    pub fn store_after_change(&self, t: MemoTicket, own: MemoTicket, a: &Attr) -> bool {
        let mut m = self.inner.lock().unwrap();
        if m.forgotten_since(t.0, a.fid.ino(), Some(own.0)) {
            return false;
        }
        m.make_room();
        m.set_attr(a);
        true
    }

    /// Remember that `name` in `parent` is `a` (a lookup's answer);
    /// false if it may be stale (the epoch moved since `t`).
    pub fn store_entry(&self, t: MemoTicket, parent: u64, name: &str, a: &Attr) -> bool {
        let mut m = self.inner.lock().unwrap();
        if m.epoch != t.0 {
            return false;
        }
        m.make_room();
        m.set_attr(a);
        let now = m.tick();
        m.entries.insert(parent, name, a.fid.ino(), now);
        true
    }

    /// Remember what a create through this gateway answered: `name` in
    /// `parent` is `a`, which is new (a directory: empty, so complete; a
    /// file: without capability). Returns false, and `parent` is no longer
    /// complete, when the answer may be stale (the epoch moved since `t`).
    pub fn store_created(&self, t: MemoTicket, parent: u64, name: &str, a: &Attr) -> bool {
        let mut m = self.inner.lock().unwrap();
        if m.epoch != t.0 {
            m.complete.remove(&parent);
            return false;
        }
        m.make_room();
        let ino = a.fid.ino();
        m.set_attr(a);
        let now = m.tick();
        m.entries.insert(parent, name, ino, now);
        match a.kind {
            xlator::FileKind::Dir => {
                m.complete.insert(ino);
            },
            xlator::FileKind::File => {
                m.lacks.insert(ino, Asked::Capability as u8);
            },
            _ => {},
        }
        true
    }

    /// A change in directory `parent` through this gateway failed or was
    /// not remembered: it may hold a name the memo does not. (Counted as a
    /// forget of `parent`, so a removal under way does not make it
    /// complete again: see [`Memo::removed`].)
    pub fn incomplete(&self, parent: u64) {
        let mut m = self.inner.lock().unwrap();
        m.moved(&[parent]);
        m.complete.remove(&parent);
    }

    /// `names` in `parent` are being removed or moved away through this
    /// gateway (a rename within one directory names both): the entries go,
    /// with the attributes of what they named and of `parent` (its mtime
    /// changes). Other names stay: attributes are kept by inode, so
    /// whatever else names the same inode loses them too. `parent` stops
    /// being complete until [`Memo::removed`] says how the change ended (a
    /// lookup meanwhile must not hear "absent" for a name a failing
    /// removal leaves).
    pub fn removing(&self, parent: u64, names: &[&str]) -> Removing {
        let mut m = self.inner.lock().unwrap();
        let mut inos = vec![parent];
        inos.extend(names.iter().filter_map(|n| m.entries.remove(parent, n)));
        m.moved(&inos);
        for ino in inos {
            m.drop_attrs(ino);
        }
        let complete = m.complete.remove(&parent);
        Removing { parent, complete, ticket: MemoTicket(m.epoch) }
    }

    /// The removal [`Memo::removing`] began is answered (`ok`), and `gone`
    /// are the inodes it changed (what the names named). The entries and
    /// attributes go again (an answer fetched meanwhile may predate the
    /// change). `parent` is complete again if it was, the change succeeded
    /// and nothing forgot `parent` meanwhile (a callback, a change here
    /// that could not be remembered); then `moved_in`, a name a rename put
    /// in `parent`, is remembered in the same step, without attributes
    /// (its inode's ctime changed), so no lookup sees neither name.
    ///
    /// The moved object's attributes as the answer carried them
    /// (`moved_in.attr`) are remembered if nothing forgot it meanwhile:
    /// the unlink or stat that follows a rename then asks nothing.
    ///
    /// `dir_after`, `parent`'s attributes just after the change as its
    /// answer carried them, is remembered under the same condition as the
    /// completeness (nothing forgot `parent` meanwhile), whatever `ok`
    /// says of the names; true if it was.
    pub fn removed(&self, r: Removing, names: &[&str], ok: bool, gone: &[u64], moved_in: Option<MovedIn>, dir_after: Option<&Attr>) -> bool {
        let mut m = self.inner.lock().unwrap();
        let parent = r.parent;
        let untouched = !m.forgotten_since(r.ticket.0, parent, None);
        let moved_untouched = moved_in.is_some_and(|mi| !m.forgotten_since(r.ticket.0, mi.ino, None));
        for n in names {
            m.entries.remove(parent, n);
        }
        let mut inos = vec![parent];
        inos.extend_from_slice(gone);
        m.moved(&inos);
        for ino in inos {
            m.drop_attrs(ino);
        }
        // (no make_room here: it may shed `parent`'s names)
        let dir_kept = match dir_after {
            Some(a) if untouched && a.fid.ino() == parent => {
                m.set_attr(a);
                true
            }
            _ => false,
        };
        if let Some(MovedIn { ino, attr: Some(a), .. }) = moved_in {
            if ok && moved_untouched && a.fid.ino() == ino {
                m.set_attr(a);
            }
        }
        if r.complete && untouched && ok {
            m.complete.insert(parent);
            if let Some(mi) = moved_in {
                let now = m.tick();
                m.entries.insert(parent, mi.name, mi.ino, now);
            }
        }
        dir_kept
    }

    /// Inode `ino`'s attributes (not its xattrs) are changing through this
    /// gateway (a link: its nlink; an append). Hands back the epoch it
    /// moved to.
    pub fn forget_attrs(&self, ino: u64) -> MemoTicket {
        let mut m = self.inner.lock().unwrap();
        m.moved(&[ino]);
        m.drop_attrs(ino);
        MemoTicket(m.epoch)
    }

    /// [`Memo::forget_attrs`] at the start of a change through this gateway
    /// that knows its result (a write, a setattr): hands back what was
    /// remembered, and the ticket [`Memo::store_changed`] takes.
    pub fn take_attrs(&self, ino: u64) -> Taken {
        let mut m = self.inner.lock().unwrap();
        m.moved(&[ino]);
        let content = m.contents.remove(ino);
        Taken { attr: m.attrs.remove(&ino).map(|k| k.attr), content, ticket: MemoTicket(m.epoch) }
    }

    /// The change that [`Memo::take_attrs`] gave `t` for is answered: inode
    /// `ino`'s attributes are now `a` and, if known, its bytes `content`,
    /// remembered if nothing moved since (else, or if unknown, forgotten).
    /// The epoch moves either way: an answer fetched meanwhile may predate
    /// the change.
    pub fn store_changed(&self, t: MemoTicket, ino: u64, a: Option<&Attr>, content: Option<Bytes>) -> bool {
        let mut m = self.inner.lock().unwrap();
        let fresh = m.epoch == t.0;
        m.moved(&[ino]);
        match a {
            Some(a) if fresh && a.fid.ino() == ino => {
                m.make_room();
                m.keep(ino, a);
                match content {
                    Some(d) if d.len() as u64 == a.size => m.contents.insert(ino, d),
                    _ => drop(m.contents.remove(ino)),
                }
                true
            }
            _ => {
                m.drop_attrs(ino);
                false
            }
        }
    }

    /// Inode `ino` changed (or is changing): attributes and capability.
    pub fn forget_inode(&self, ino: u64) {
        let mut m = self.inner.lock().unwrap();
        m.moved(&[ino]);
        m.drop_attrs(ino);
        m.lacks.remove(&ino);
        // a directory's attributes are called back when a name is added
        m.complete.remove(&ino);
    }

    /// `name` in `parent` changed (or is changing): the entry, and the
    /// attributes of the inode it named (its nlink or ctime change too).
    pub fn forget_entry(&self, parent: u64, name: &str) {
        let mut m = self.inner.lock().unwrap();
        let named = m.entries.remove(parent, name);
        match named {
            Some(ino) => m.moved(&[parent, ino]),
            None => m.moved(&[parent]),
        }
        if let Some(ino) = named {
            m.drop_attrs(ino);
        }
        m.drop_attrs(parent);
        m.complete.remove(&parent);
    }

    /// Everything.
    pub fn clear(&self) {
        let mut m = self.inner.lock().unwrap();
        m.moved(&[ALL]);
        m.attrs.clear();
        m.entries.clear();
        m.lacks.clear();
        m.complete.clear();
        m.contents.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlator::{FileId, FileKind, Timestamp};

    fn attr(fid: u128, size: u64) -> Attr {
        let t = Timestamp { secs: 0, nsecs: 0 };
        Attr { fid: FileId(fid), kind: FileKind::File, size, blocks: 0, perm: 0o644, nlink: 1, uid: 0, gid: 0, rdev: 0, atime: t, mtime: t, ctime: t }
    }

    #[test]
    fn at_the_bound_the_half_used_longest_ago_is_forgotten_and_no_name_that_exists_reads_absent() {
        let m = Memo::default();
        let (dirs, per_dir) = (1_000u128, MAX_ITEMS as u128 / 1_000);
        let names = |d: u128| (0..per_dir).map(move |f| (attr(d, 0).fid.ino(), format!("f{f}")));
        let mut fid = 1_000_000u128;
        for d in 1..=dirs {
            let mut dir = attr(d, 0);
            dir.kind = FileKind::Dir;
            assert!(m.store_created(m.ticket(), 1, &format!("d{d}"), &dir));
            for f in 0..per_dir {
                fid += 1;
                assert!(m.store_created(m.ticket(), dir.fid.ino(), &format!("f{f}"), &attr(fid, 1)));
            }
            if d == dirs * 6 / 10 {
                // the oldest directory is walked again: used lately
                assert!(names(1).all(|(dir, f)| m.entry(dir, &f).is_some()));
            }
        }
        let newest = attr(fid, 1).fid.ino();
        let i = m.inner.lock().unwrap();
        assert!((MAX_ITEMS / 4..=MAX_ITEMS * 3 / 4).contains(&i.attrs.len()), "{} attributes kept", i.attrs.len());
        assert!((MAX_ITEMS / 4..=MAX_ITEMS * 3 / 4).contains(&i.entries.len()), "{} names kept", i.entries.len());
        assert!(i.complete.len() < dirs as usize && !i.complete.is_empty(), "{} directories complete", i.complete.len());
        drop(i);
        assert!(m.attr(newest).is_some(), "what was stored after the room was made is kept");
        assert!(names(1).all(|(dir, f)| m.entry(dir, &f).is_some()), "what was used lately is kept");
        assert!(names(2).all(|(dir, f)| m.entry(dir, &f).is_none()), "what was used longest ago is gone");
        for d in 1..=dirs {
            for (dir, f) in names(d) {
                assert!(!m.absent(dir, &f), "d{d}/{f} exists but reads absent");
            }
        }
    }

    #[test]
    fn an_answer_fetched_across_a_forget_is_not_remembered() {
        let m = Memo::default();
        let a = attr(5, 1);
        let t = m.ticket();
        m.forget_inode(a.fid.ino());
        m.store_attr(t, &a);
        assert!(m.attr(a.fid.ino()).is_none(), "fetched before the change: dropped");
        let t = m.ticket();
        assert!(m.store_entry(t, 1, "f", &a));
        assert_eq!(m.entry(1, "f"), Some(a.clone()));
        assert_eq!(m.attr(a.fid.ino()), Some(a.clone()));
    }

    #[test]
    fn attributes_fetched_ahead_are_kept_across_other_inodes_changes_only() {
        let m = Memo::default();
        let (d, f) = (dir(1), attr(2, 1));
        let ino = d.fid.ino();
        let t = m.ticket();
        m.take_attrs(f.fid.ino());
        m.forget_inode(3);
        assert!(m.store_ahead(t, &d), "other inodes changed meanwhile");
        assert_eq!(m.attr(ino), Some(d.clone()));
        m.forget_attrs(ino);
        m.store_attr(t, &d);
        assert!(m.attr(ino).is_none(), "a plain answer is voided by any change");
        let voided = |what: &str, change: &dyn Fn()| {
            m.forget_attrs(ino);
            let t = m.ticket();
            change();
            assert!(!m.store_ahead(t, &d), "{what}");
            assert!(m.attr(ino).is_none(), "{what}");
        };
        voided("the directory changed here", &|| _ = m.forget_attrs(ino));
        voided("the directory was called back", &|| m.forget_inode(ino));
        voided("a name of it was called back", &|| m.forget_entry(ino, "x"));
        voided("everything was forgotten", &|| m.clear());
        voided("more changes than are kept by inode", &|| (0..RECENT as u64 + 1).for_each(|i| _ = m.forget_attrs(100 + i)));
    }

    #[test]
    fn a_directorys_attributes_carried_by_a_change_here_are_kept_unless_it_was_forgotten_meanwhile() {
        let m = Memo::default();
        let d = dir(60);
        let ino = d.fid.ino();
        // an add: the directory is forgotten before it is sent and once answered
        let sent = m.forget_attrs(ino);
        m.take_attrs(99);
        let own = m.forget_attrs(ino);
        assert!(m.store_after_change(sent, own, &d), "other inodes changed meanwhile, and its own forget");
        assert_eq!(m.attr(ino), Some(d.clone()));
        let voided = |what: &str, change: &dyn Fn()| {
            let sent = m.forget_attrs(ino);
            change();
            let own = m.forget_attrs(ino);
            assert!(!m.store_after_change(sent, own, &d), "{what}");
            assert!(m.attr(ino).is_none(), "{what}");
        };
        voided("another change here in the directory", &|| _ = m.forget_attrs(ino));
        voided("the directory was called back", &|| m.forget_inode(ino));
        voided("a name of it was called back", &|| m.forget_entry(ino, "x"));
        voided("everything was forgotten", &|| m.clear());
        // a removal
        let r = m.removing(ino, &["a"]);
        m.take_attrs(99);
        assert!(m.removed(r, &["a"], true, &[61], None, Some(&d)));
        assert_eq!(m.attr(ino), Some(d.clone()));
        let r = m.removing(ino, &["a"]);
        m.forget_inode(ino);
        assert!(!m.removed(r, &["a"], true, &[61], None, Some(&d)), "called back during the removal");
        assert!(m.attr(ino).is_none());
        let r = m.removing(ino, &["a"]);
        assert!(!m.removed(r, &["a"], true, &[61], None, Some(&dir(62))), "another object's attributes");
        assert!(m.attr(ino).is_none() && m.attr(dir(62).fid.ino()).is_none());
    }

    #[test]
    fn forgetting_an_entry_forgets_what_it_named_and_the_directory() {
        let m = Memo::default();
        let (dir, f) = (attr(1, 0), attr(7, 3));
        let t = m.ticket();
        m.store_attr(t, &dir);
        assert!(m.store_entry(t, dir.fid.ino(), "f", &f));
        m.forget_entry(dir.fid.ino(), "f");
        assert!(m.entry(dir.fid.ino(), "f").is_none());
        assert!(m.attr(f.fid.ino()).is_none() && m.attr(dir.fid.ino()).is_none());
        let t = m.ticket();
        assert!(m.store_entry(t, dir.fid.ino(), "f", &f));
        m.clear();
        assert!(m.entry(dir.fid.ino(), "f").is_none());
    }

    #[test]
    fn a_change_here_leaves_its_result_unless_something_moved_meanwhile() {
        let m = Memo::default();
        let (before, after) = (attr(5, 1), attr(5, 2));
        let ino = before.fid.ino();
        m.store_attr(m.ticket(), &before);
        let taken = m.take_attrs(ino);
        assert_eq!(taken.attr, Some(before.clone()));
        assert!(m.attr(ino).is_none(), "forgotten while the change is under way");
        // an answer fetched meanwhile may predate the change: never stored
        let meanwhile = m.ticket();
        assert!(m.store_changed(taken.ticket, ino, Some(&after), None));
        m.store_attr(meanwhile, &before);
        assert_eq!(m.attr(ino), Some(after.clone()));
        // anything forgotten during the change (a callback): not stored
        let t = m.take_attrs(ino).ticket;
        m.forget_inode(99);
        assert!(!m.store_changed(t, ino, Some(&after), None));
        assert!(m.attr(ino).is_none());
        // two changes at once: neither result is known to be the last
        m.store_attr(m.ticket(), &before);
        let (t1, taken2) = (m.take_attrs(ino).ticket, m.take_attrs(ino));
        assert!(taken2.attr.is_none() && !m.store_changed(t1, ino, Some(&after), None));
        assert!(!m.store_changed(taken2.ticket, ino, None, None) && m.attr(ino).is_none());
    }

    #[test]
    fn a_small_files_bytes_go_with_its_attributes() {
        let m = Memo::default();
        let a = attr(5, 3);
        let ino = a.fid.ino();
        let abc = Bytes::from_static(b"abc");
        let store = |a: &Attr, d: &Bytes| {
            let t = m.take_attrs(ino).ticket;
            assert!(m.store_changed(t, ino, Some(a), Some(d.clone())));
        };
        store(&a, &abc);
        assert_eq!(m.content(ino), Some(abc.clone()));
        assert_eq!(m.take_attrs(ino).content, Some(abc.clone()), "a change here takes them");
        assert!(m.content(ino).is_none());
        // bytes that disagree with the size are not kept
        let t = m.take_attrs(ino).ticket;
        assert!(m.store_changed(t, ino, Some(&a), Some(Bytes::from_static(b"ab"))));
        assert!(m.content(ino).is_none());
        // what makes them go
        let goes = |what: &str, f: &dyn Fn()| {
            store(&a, &abc);
            f();
            assert!(m.content(ino).is_none(), "{what}");
        };
        goes("a callback of the inode", &|| m.forget_inode(ino));
        goes("a change to its attributes here", &|| _ = m.forget_attrs(ino));
        goes("a callback of a name of it", &|| {
            assert!(m.store_entry(m.ticket(), 1, "f", &a));
            m.forget_entry(1, "f")
        });
        goes("everything", &|| m.clear());
        goes("an answer with another size", &|| m.store_attr(m.ticket(), &attr(5, 4)));
        let later = Attr { mtime: xlator::Timestamp { secs: 9, nsecs: 0 }, ..a.clone() };
        goes("an answer with another mtime", &|| m.store_attr(m.ticket(), &later));
        goes("a change whose answer came across a forget", &|| {
            let t = m.take_attrs(ino).ticket;
            m.forget_inode(99);
            m.store_changed(t, ino, Some(&a), Some(abc.clone()));
        });
        // the same attributes again keep them
        store(&a, &abc);
        m.store_attr(m.ticket(), &a);
        assert_eq!(m.content(ino), Some(abc));
    }

    fn dir(fid: u128) -> Attr {
        Attr { kind: FileKind::Dir, ..attr(fid, 0) }
    }

    #[test]
    fn a_directory_made_here_knows_which_names_it_lacks() {
        let m = Memo::default();
        let (root, d, f) = (1, dir(9), attr(10, 0));
        assert!(!m.absent(root, "x"), "nothing is known of a directory not made here");
        assert!(m.store_created(m.ticket(), root, "d", &d));
        let d = d.fid.ino();
        assert!(m.absent(d, "f") && !m.absent(root, "d"));
        assert!(m.store_created(m.ticket(), d, "f", &f));
        assert!(!m.absent(d, "f") && m.absent(d, "g"));
        assert!(m.lacks(f.fid.ino(), Asked::Capability), "a file just made has no capability");
        assert!(!m.lacks(f.fid.ino(), Asked::Selinux), "its storage host may label it");
        m.forget_attrs(f.fid.ino());
        assert!(m.absent(d, "g"), "a write to a file keeps its directory's names");
    }

    #[test]
    fn completeness_ends_with_anything_that_may_add_a_name() {
        let m = Memo::default();
        let fresh = |name: &str| {
            let d = dir(20 + name.len() as u128);
            m.clear();
            assert!(m.store_created(m.ticket(), 1, name, &d));
            d.fid.ino()
        };
        // another gateway's create calls back the directory's attributes
        let d = fresh("a");
        m.forget_inode(d);
        assert!(!m.absent(d, "x"));
        // a name of it called back
        let d = fresh("bb");
        m.forget_entry(d, "y");
        assert!(!m.absent(d, "x"));
        // a create here whose answer came across a forget: the name exists, unremembered
        let d = fresh("ccc");
        let t = m.ticket();
        m.forget_attrs(99);
        assert!(!m.store_created(t, d, "x", &attr(30, 0)));
        assert!(!m.absent(d, "x"));
        // a failed change here
        let d = fresh("dddd");
        m.incomplete(d);
        assert!(!m.absent(d, "x"));
        // everything
        let d = fresh("eeeee");
        m.clear();
        assert!(!m.absent(d, "x"));
    }

    #[test]
    fn a_removal_here_forgets_only_what_it_touched_and_keeps_a_directory_complete() {
        let m = Memo::default();
        let d = dir(40);
        assert!(m.store_created(m.ticket(), 1, "d", &d));
        let d = d.fid.ino();
        let (a, b, c) = (attr(41, 1), attr(42, 1), attr(43, 1));
        for (n, x) in [("a", &a), ("b", &b), ("c", &c)] {
            assert!(m.store_created(m.ticket(), d, n, x));
        }
        // unlink of "a": only it goes, and the directory stays complete
        let r = m.removing(d, &["a"]);
        assert!(!m.absent(d, "a"), "under way: a lookup of the name must ask");
        assert!(!m.absent(d, "x"), "under way: nothing is known absent");
        m.removed(r, &["a"], true, &[a.fid.ino()], None, None);
        assert!(m.absent(d, "a") && m.absent(d, "x"));
        assert_eq!(m.entry(d, "b"), Some(b.clone()), "other names stay");
        assert!(m.attr(d).is_none(), "the directory's mtime changed");
        // rename "b" -> "c" in the directory (replacing c)
        let r = m.removing(d, &["b", "c"]);
        m.removed(r, &["b", "c"], true, &[b.fid.ino(), c.fid.ino()], Some(MovedIn { name: "c", ino: b.fid.ino(), attr: None }), None);
        assert!(m.absent(d, "b"));
        assert!(!m.absent(d, "c"), "the moved name is there");
        assert!(m.entry(d, "c").is_none(), "remembered without attributes: its ctime changed");
        assert!(m.attr(c.fid.ino()).is_none());
        // ... unless the answer carried them (as after the rename)
        let b_after = attr(42, 2);
        let r = m.removing(d, &["c", "e"]);
        m.removed(r, &["c", "e"], true, &[b.fid.ino()], Some(MovedIn { name: "e", ino: b.fid.ino(), attr: Some(&b_after) }), None);
        assert_eq!(m.entry(d, "e"), Some(b_after.clone()), "the moved object's attributes after the rename");
        // ... and nothing forgot it meanwhile
        let r = m.removing(d, &["e", "c"]);
        m.forget_attrs(b.fid.ino());
        m.removed(r, &["e", "c"], true, &[b.fid.ino()], Some(MovedIn { name: "c", ino: b.fid.ino(), attr: Some(&b_after) }), None);
        assert!(m.entry(d, "c").is_none() && m.attr(b.fid.ino()).is_none(), "called back during the rename");
        // a failed removal: nothing is known absent any more
        let r = m.removing(d, &["c"]);
        m.removed(r, &["c"], false, &[], None, None);
        assert!(!m.absent(d, "x"));
    }

    #[test]
    fn a_removal_across_a_callback_or_a_failed_create_leaves_the_directory_incomplete() {
        let m = Memo::default();
        for end in ["callback", "failed create", "everything"] {
            let d = dir(50);
            m.clear();
            assert!(m.store_created(m.ticket(), 1, "d", &d));
            let d = d.fid.ino();
            assert!(m.store_created(m.ticket(), d, "a", &attr(51, 1)));
            let r = m.removing(d, &["a"]);
            match end {
                "callback" => m.forget_inode(d),
                "failed create" => m.incomplete(d),
                _ => m.clear(),
            }
            m.removed(r, &["a"], true, &[51], None, None);
            assert!(!m.absent(d, "x"), "{end} during the removal: another name may exist");
        }
    }
}
