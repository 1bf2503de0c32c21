//! What every file operation does to what the coherence translator keeps:
//! the [`Stateful`] implementation. Reads are answered from the memo when
//! it may (waiting briefly for the holds they need) and their answers
//! remembered; every data and namespace operation of the table is placed
//! here (a new one is a compile error until it is), saying what it forgets
//! before it is sent and what it forgets or remembers once answered: the
//! servers do not call back the gateway that asked, so its own changes are
//! this translator's to account for. Controls pass through.

use crate::coherence::{ino, Coherence};
use crate::kernel_cache::Adding;
use crate::memo::{Asked, MovedIn};
use crate::small_files;
use async_trait::async_trait;
use std::time::Duration;
use xlator::*;

/// How long a getattr waits for the same directory's attributes fetched
/// ahead before it asks the servers itself.
const AHEAD_WAIT: Duration = Duration::from_secs(1);

#[async_trait]
impl Stateful for Coherence {
    fn name(&self) -> &str {
        "coherence"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.next)
    }

    async fn upcall(&self, upcall: &Upcall) {
        self.heard(upcall).await
    }

    // ── reads ────────────────────────────────────────────────────────────

    /// (The bridge asked the memo first: this is a miss.)
    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        let (kc, dir) = (&self.kc, ino(parent));
        let (t, m) = (kc.ticket(), kc.memo_ticket());
        // A walk through a directory not remembered: list it ahead.
        if let Some(listing) = self.ahead.missed(&self.next, kc, dir, parent) {
            if let Some(a) = listing.wait_for(kc, dir, name).await {
                return Ok(a);
            }
        }
        // remembered, and the holds it needs under way
        if let Some((a, _)) = kc.memo_entry_soon(dir, name).await {
            return Ok(a);
        }
        let a = self.next.lookup(parent, name).await?;
        kc.remember_entry(t, m, dir, name, &a);
        Ok(a)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        let (kc, ino) = (&self.kc, ino(loc));
        let (t, m) = (kc.ticket(), kc.memo_ticket());
        // remembered, and its hold under way
        if let Some((a, _)) = kc.memo_attr_soon(ino).await {
            return Ok(a);
        }
        // a directory's, fetched ahead after a change here
        if self.dirs_ahead.wait(ino, AHEAD_WAIT).await {
            if let Some((a, _)) = kc.memo_attr_soon(ino).await {
                return Ok(a);
            }
        }
        let a = self.next.getattr(loc).await?;
        kc.remember_attr(t, m, &a);
        Ok(a)
    }

    /// A server's "no `security.capability`" (or "no `security.selinux`")
    /// is remembered under the lease (see [`Asked`]).
    async fn getxattr(&self, loc: &Loc, name: &str) -> FsResult<Data> {
        let (t, m) = (self.kc.ticket(), self.kc.memo_ticket());
        let r = self.next.getxattr(loc, name).await;
        if let (Some(x), Err(FsError::ENODATA)) = (Asked::of(name), &r) {
            self.kc.learned_absent(t, m, ino(loc), x);
        }
        r
    }

    /// With attributes (`plus`): what was listed is held before it is
    /// handed out, so the kernel can cache it (one round for a batch; `ls
    /// -l` in a directory another gateway wrote then stats nothing through
    /// FUSE), and remembered as lookups' answers would be.
    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        if !plus {
            return self.next.readdir(loc, cookie, max, false).await;
        }
        let (kc, dir) = (&self.kc, ino(loc));
        let (t, m) = (kc.ticket(), kc.memo_ticket());
        let entries = self.next.readdir(loc, cookie, max, true).await?;
        if !entries.is_empty() {
            kc.hold_listed(dir, &entries).await;
        }
        for e in &entries {
            if let Some(a) = &e.attr {
                kc.remember_entry(t, m, dir, &e.name, a);
            }
        }
        Ok(entries)
    }

    // ── data mutations ───────────────────────────────────────────────────

    /// The answer is the inode's attributes after it (the merge of every
    /// copy's, as a getattr's): it replaces what was remembered.
    async fn setattr(&self, loc: &Loc, set: &SetAttr) -> FsResult<Attr> {
        let (kc, ino) = (&self.kc, ino(loc));
        let t = kc.ticket();
        let m = kc.changing_attrs(ino).ticket;
        let r = self.next.setattr(loc, set).await;
        kc.changed_attrs(t, m, ino, r.as_ref().ok(), None);
        r
    }

    /// Nothing kept changes: permissions are the kernel's, and `O_TRUNC`
    /// comes as a SETATTR of its own (no `FUSE_ATOMIC_O_TRUNC`).
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.next.open(loc, flags).await
    }

    /// What was remembered goes (the kernel asks for the attributes after
    /// every write) and comes back updated by the write's answer, with a
    /// small file's bytes when they are all known (`small_files`).
    async fn write(&self, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
        let (kc, ino) = (&self.kc, ino(loc));
        let t = kc.ticket();
        let before = kc.changing_attrs(ino);
        let r = self.next.write(loc, offset, data.clone()).await;
        let after = r.as_ref().ok().zip(before.attr.as_ref()).and_then(|(w, b)| w.attr_after(b));
        // (a short write leaves the file's bytes unknown)
        let whole = r.as_ref().is_ok_and(|w| w.written as usize == data.len());
        let content = after.as_ref().filter(|_| whole).and_then(|a| small_files::after_write(before.content, offset, &data, a.size));
        kc.changed_attrs(t, before.ticket, ino, after.as_ref(), content);
        r
    }

    /// As a setattr with a size: what was remembered (a small file's bytes
    /// too) goes, and the answer, the merged attributes after, replaces it.
    /// The kernel drops its own pages of a punched or zeroed range
    /// (`fuse_file_fallocate` truncates its page cache there on success).
    async fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        let (kc, ino) = (&self.kc, ino(loc));
        let t = kc.ticket();
        let m = kc.changing_attrs(ino).ticket;
        let r = self.next.fallocate(loc, mode, ranges).await;
        kc.changed_attrs(t, m, ino, r.as_ref().ok(), None);
        r
    }

    /// As a write of the destination, whose new bytes and attributes this
    /// gateway does not see: what was remembered of it goes, before and
    /// after (the kernel drops its own pages of the range, and asks for the
    /// attributes again).
    async fn copy_range(&self, src: &Loc, dst: &Loc, ranges: &[CopySpan]) -> FsResult<WriteReply> {
        let (kc, ino) = (&self.kc, ino(dst));
        let t = kc.ticket();
        let m = kc.changing_attrs(ino).ticket;
        let r = self.next.copy_range(src, dst, ranges).await;
        kc.changed_attrs(t, m, ino, None, None);
        r
    }

    /// Its attributes and remembered capability go, before and after.
    async fn setxattr(&self, loc: &Loc, name: &str, value: &[u8], flags: XattrFlags) -> FsResult<()> {
        self.kc.changing_xattrs(ino(loc));
        let r = self.next.setxattr(loc, name, value, flags).await;
        self.kc.changing_xattrs(ino(loc));
        r
    }

    async fn removexattr(&self, loc: &Loc, name: &str) -> FsResult<()> {
        self.kc.changing_xattrs(ino(loc));
        let r = self.next.removexattr(loc, name).await;
        self.kc.changing_xattrs(ino(loc));
        r
    }

    // ── namespace mutations ──────────────────────────────────────────────

    /// Regular files too: one round trip, nothing left open.
    async fn mknod(&self, parent: &Loc, new: &NewFile, mode: u32, rdev: u32) -> FsResult<Made> {
        let c = self.kc.adding(ino(parent));
        let r = self.next.mknod(parent, new, mode, rdev).await;
        self.added(c, parent, &new.name, Some(new.fid), r)
    }

    async fn mkdir(&self, parent: &Loc, new: &NewFile) -> FsResult<Made> {
        let c = self.kc.adding(ino(parent));
        let r = self.next.mkdir(parent, new).await;
        self.added(c, parent, &new.name, Some(new.fid), r)
    }

    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let c = self.kc.adding(ino(parent));
        let r = self.next.create(parent, new, flags).await;
        self.added(c, parent, &new.name, Some(new.fid), r)
    }

    async fn symlink(&self, parent: &Loc, new: &NewFile, target: &str) -> FsResult<Made> {
        let c = self.kc.adding(ino(parent));
        let r = self.next.symlink(parent, new, target).await;
        self.added(c, parent, &new.name, Some(new.fid), r)
    }

    /// The file's nlink changes too.
    async fn link(&self, loc: &Loc, newparent: &Loc, newname: &str) -> FsResult<Made> {
        self.kc.changing_inode(ino(loc));
        let c = self.kc.adding(ino(newparent));
        let r = self.next.link(loc, newparent, newname).await;
        self.kc.changing_inode(ino(loc));
        self.added(c, newparent, newname, None, r)
    }

    /// The name goes, with what it named's attributes (it loses a link;
    /// kept by inode, they go under every other name too) and the
    /// directory's, which the answer gives back as they are after it; the
    /// rest of what is remembered stays.
    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.kc.removing(ino(parent), &[name]);
        let res = self.next.unlink(parent, name).await;
        let gone: Vec<u64> = res.iter().map(|x| x.fid.ino()).collect();
        let after = res.as_ref().ok().and_then(|x| x.dir.as_ref());
        let known = self.kc.removed(r, &[name], res.is_ok(), &gone, None, after);
        if res.is_ok() && !known {
            self.dir_ahead(parent);
        }
        res
    }

    async fn rmdir(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        let r = self.kc.removing(ino(parent), &[name]);
        let res = self.next.rmdir(parent, name).await;
        let gone: Vec<u64> = res.iter().map(|x| x.fid.ino()).collect();
        let after = res.as_ref().ok().and_then(|x| x.dir.as_ref());
        let known = self.kc.removed(r, &[name], res.is_ok(), &gone, None, after);
        if res.is_ok() && !known {
            self.dir_ahead(parent);
        }
        res
    }

    /// Both names go, with the attributes of both directories, of what
    /// moved (its ctime) and of what it replaced; the answer gives back
    /// the directories' and the moved object's as they are after it, and
    /// the new name is remembered where the target directory was complete.
    async fn rename(&self, parent: &Loc, name: &str, newparent: &Loc, newname: &str, flags: RenameFlags) -> FsResult<Renamed> {
        let (from, to) = (ino(parent), ino(newparent));
        let (rf, rt) = if from == to {
            (self.kc.removing(from, &[name, newname]), None)
        } else {
            (self.kc.removing(from, &[name]), Some(self.kc.removing(to, &[newname])))
        };
        let res = self.next.rename(parent, name, newparent, newname, flags).await;
        // (an exchange leaves both names, each naming what the other did:
        // neither directory is known complete after it)
        let ok = res.is_ok() && !flags.exchange;
        let moved = res.as_ref().ok().map(|r| r.moved.ino());
        let mut gone: Vec<u64> = moved.into_iter().collect();
        gone.extend(res.iter().filter_map(|r| r.replaced.as_ref()).map(|x| x.fid.ino()));
        let moved_attr = res.as_ref().ok().and_then(|r| r.moved_attr.as_ref());
        let moved_in = moved.map(|ino| MovedIn { name: newname, ino, attr: moved_attr });
        let (after, newafter) = match &res {
            Ok(r) => (r.dir.as_ref(), r.newdir.as_ref()),
            Err(_) => (None, None),
        };
        let known = match rt {
            None => self.kc.removed(rf, &[name, newname], ok, &gone, moved_in, after),
            Some(rt) => {
                let known = self.kc.removed(rf, &[name], ok, &gone, None, after);
                if !self.kc.removed(rt, &[newname], ok, &gone, moved_in, newafter) && ok {
                    self.dir_ahead(newparent);
                }
                known
            }
        };
        if res.is_ok() && !known {
            self.dir_ahead(parent);
        }
        res
    }
}

impl Coherence {
    /// The change [`KernelCache::adding`] began (`c`) was answered `r` for
    /// the new entry `name`: remembered, as a lookup's answer would be (it
    /// is the servers' state after it). `made` is the id the request drew
    /// for a new object: an answer with it is that object, new (an answer
    /// with another id is one that existed, e.g. a create racing another
    /// gateway's).
    ///
    /// The kernel drops the directory's attributes once a name is added, and
    /// asks for them at its next path walk through it (the permission check
    /// before the next create): a network round trip per file written
    /// (93 µs of ~1 ms per 1 KiB file, docs/benchmarks/archive/issue-12-kernel-caching.md).
    /// The answer carries them as they are just after the change, and they
    /// are remembered unless the directory changed again meanwhile; when it
    /// does not carry them (a server did not give its copy) or they could
    /// not be kept, they are fetched beside the requests that follow.
    fn added(&self, c: Adding, dir: &Loc, name: &str, made: Option<FileId>, r: FsResult<Made>) -> FsResult<Made> {
        let (kc, dir_ino) = (&self.kc, ino(dir));
        let m = r.as_ref().ok();
        let a = m.map(|m| &m.attr);
        let known = kc.added(c, dir_ino, name, a, a.is_some_and(|a| Some(a.fid) == made), m.and_then(|m| m.dir.as_ref()));
        if a.is_some() && !known {
            self.dir_ahead(dir);
        }
        r
    }

    /// Fetch directory `dir`'s attributes beside the requests that follow
    /// a change in it here whose answer did not leave them known (see
    /// [`Coherence::added`]).
    fn dir_ahead(&self, dir: &Loc) {
        let kc = &self.kc;
        if !kc.memo_serving() {
            return;
        }
        let (kc, next, dir) = (kc.clone(), self.next.clone(), dir.clone());
        let (t, m) = (kc.ticket(), kc.memo_ticket());
        let fetching = self.dirs_ahead.start(ino(&dir));
        tokio::spawn(async move {
            let _fetching = fetching;
            if let Ok(a) = next.getattr(&dir).await {
                if a.fid.ino() == ino(&dir) {
                    kc.remember_ahead(t, m, &a);
                }
            }
        });
    }
}
