//! Random calls over a small namespace (four names, three levels), so
//! names collide, directories fill up and empty, and files are replaced
//! under ids that callers still hold.

use crate::call::Call;
use rand::rngs::StdRng;
use rand::Rng;
use std::sync::Arc;
use xlator::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const PERMS: [u32; 6] = [0o644, 0o600, 0o755, 0o700, 0o444, 0o1777];
const XATTRS: [&str; 10] = [
    "user.a",
    "user.b",
    "user.c",
    "user.imca.fid",
    "trusted.t",
    "trusted.imca.fid",
    "",
    "security.s",
    "security.capability",
    "system.posix_acl_access",
];

pub struct Gen {
    rng: StdRng,
    /// posix chowns and keeps special files' ids only as root
    root: bool,
    /// every id handed out, for locations that name a stale or wrong file
    fids: Vec<FileId>,
}

impl Gen {
    pub fn new(rng: StdRng, root: bool) -> Gen {
        Gen { rng, root, fids: Vec::new() }
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from[self.rng.random_range(0..from.len())].clone()
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    /// Mostly a good name; sometimes one every leaf must refuse.
    fn name(&mut self) -> String {
        if self.chance(94) {
            return self.pick(&NAMES).to_string();
        }
        let long = "n".repeat(256);
        self.pick(&["", ".", "..", "x/y", &long, ".imca"]).to_string()
    }

    fn path(&mut self, max_depth: usize) -> String {
        if self.chance(3) {
            return self.pick(&["a//b", "../a", ".imca/x", "a/", "/a"]).to_string();
        }
        let depth = self.rng.random_range(0..=max_depth);
        (0..depth).map(|_| self.pick(&NAMES)).collect::<Vec<_>>().join("/")
    }

    /// A location for `path`: with the id that is there now, with none, or
    /// with some id from the past (stale, wrong, or an unlinked open file).
    async fn loc_of(&mut self, x: &Arc<dyn Translator>, path: String) -> Loc {
        let r = self.rng.random_range(0..100);
        let fid = if r < 55 {
            x.getattr(&Loc::new(path.clone(), None)).await.ok().map(|a| a.fid)
        } else if r < 85 || self.fids.is_empty() {
            None
        } else {
            Some(self.pick(&self.fids.clone()))
        };
        Loc::new(path, fid)
    }

    /// An object that exists now (a random walk down from the root), or
    /// sometimes any path at all.
    async fn loc(&mut self, x: &Arc<dyn Translator>) -> Loc {
        let p = if self.chance(75) { self.walk(x, false, 30).await } else { self.path(3) };
        self.loc_of(x, p).await
    }

    /// A parent directory: mostly one that exists.
    async fn dir(&mut self, x: &Arc<dyn Translator>) -> Loc {
        let p = if self.chance(75) { self.walk(x, true, 30).await } else { self.path(2) };
        self.loc_of(x, p).await
    }

    /// A directory and a name in it: mostly an existing entry.
    async fn entry(&mut self, x: &Arc<dyn Translator>) -> (Loc, String) {
        self.entry_from(x, false, 30).await
    }

    /// An entry at the end of a walk (`dirs_only`, stopping early at `stop`
    /// percent per level), or sometimes any directory and name.
    async fn entry_from(&mut self, x: &Arc<dyn Translator>, dirs_only: bool, stop: u32) -> (Loc, String) {
        if self.chance(60) {
            let p = self.walk(x, dirs_only, stop).await;
            if let Some((dir, name)) = p.rsplit_once('/').or(Some(("", p.as_str())).filter(|_| !p.is_empty())) {
                let (dir, name) = (dir.to_string(), name.to_string());
                return (self.loc_of(x, dir).await, name);
            }
        }
        (self.dir(x).await, self.name())
    }

    /// Down from the root through `x`'s directories, stopping at random.
    async fn walk(&mut self, x: &Arc<dyn Translator>, dirs_only: bool, stop: u32) -> String {
        let mut at = String::new();
        loop {
            let entries = x.readdir(&Loc::new(at.clone(), None), 0, 100, false).await.unwrap_or_default();
            let next: Vec<DirEntry> = entries.into_iter().filter(|e| !dirs_only || e.kind == FileKind::Dir).collect();
            if next.is_empty() || self.chance(stop) {
                return at;
            }
            let e = self.pick(&next);
            at = if at.is_empty() { e.name } else { format!("{at}/{}", e.name) };
            if e.kind != FileKind::Dir {
                return at;
            }
        }
    }

    /// Mostly a fresh id; sometimes one handed out before (in use, or
    /// free again since its object went away) or one no gateway makes.
    fn new_file(&mut self, name: String) -> NewFile {
        let fid = match self.rng.random_range(0..100) {
            0..=5 if !self.fids.is_empty() => self.pick(&self.fids.clone()),
            6 => self.pick(&[FileId::ROOT, FileId(0), FileId(0x4000_0000_0000_0000_0000_0000_0000_0001)]),
            _ => FileId::from_random(self.rng.random()),
        };
        self.fids.push(fid);
        let owner = if self.root {
            self.pick(&[Owner { uid: 0, gid: 0 }, Owner { uid: 1000, gid: 100 }])
        } else {
            unsafe { Owner { uid: libc::geteuid(), gid: libc::getegid() } }
        };
        let perm = if self.root { self.pick(&PERMS) } else { 0o644 };
        NewFile { name, fid, perm, owner, exclusive: self.chance(20) }
    }

    /// `trusted.*` needs root on posix; memory does not model who asks.
    fn xattr_name(&mut self) -> String {
        loop {
            let n = self.pick(&XATTRS);
            if self.root || !n.starts_with("trusted.") {
                return n.to_string();
            }
        }
    }

    fn setattr(&mut self) -> SetAttr {
        let mut s = SetAttr::default();
        if self.chance(30) {
            s.size = Some(self.rng.random_range(0..20_000));
        }
        if self.chance(30) && self.root {
            s.perm = Some(self.pick(&PERMS));
        }
        if self.chance(15) && self.root {
            s.uid = Some(self.pick(&[0, 1000]));
            s.gid = Some(self.pick(&[0, 100]));
        }
        let t = TimeSet::At(Timestamp { secs: self.rng.random_range(1..2_000_000_000), nsecs: self.rng.random_range(0..1_000_000_000) });
        if self.chance(20) {
            s.mtime = Some(if self.chance(50) { t } else { TimeSet::Now });
        }
        if self.chance(10) {
            s.atime = Some(t);
        }
        s
    }

    fn xattr_flags(&mut self) -> XattrFlags {
        match self.rng.random_range(0..10) {
            0..=5 => XattrFlags::default(),
            6 | 7 => XattrFlags { create: true, replace: false },
            8 => XattrFlags { create: false, replace: true },
            _ => XattrFlags { create: true, replace: true },
        }
    }

    fn rename_flags(&mut self) -> RenameFlags {
        match self.rng.random_range(0..20) {
            0..=11 => RenameFlags::default(),
            12..=14 => RenameFlags { noreplace: true, exchange: false },
            15..=18 => RenameFlags { noreplace: false, exchange: true },
            _ => RenameFlags { noreplace: true, exchange: true },
        }
    }

    /// The next call; `x` (posix) is asked which ids paths hold now.
    pub async fn call(&mut self, x: &Arc<dyn Translator>) -> Call {
        match self.rng.random_range(0..118) {
            0..=9 => {
                let (p, n) = (self.dir(x).await, self.name());
                let mut flags = libc::O_RDWR | libc::O_CREAT;
                if self.chance(25) {
                    flags |= libc::O_TRUNC;
                }
                if self.chance(10) {
                    flags |= libc::O_EXCL;
                }
                Call::Create(p, self.new_file(n), flags)
            }
            10..=17 => {
                let (p, n) = (self.dir(x).await, self.name());
                Call::Mkdir(p, self.new_file(n))
            }
            18..=20 if self.root => {
                let (p, n) = (self.dir(x).await, self.name());
                let kinds =
                    [libc::S_IFIFO, libc::S_IFSOCK, libc::S_IFREG, 0, libc::S_IFCHR, libc::S_IFDIR, libc::S_IFLNK];
                let mode = self.pick(&kinds) | 0o640;
                Call::Mknod(p, self.new_file(n), mode, 0x103)
            }
            21..=23 if self.root => {
                let (p, n) = (self.dir(x).await, self.name());
                let (long, longer) = ("x".repeat(300), "t".repeat(4096));
                let target = self.pick(&["a", "b/c", "/abs", "", &long, &longer]).to_string();
                Call::Symlink(p, self.new_file(n), target)
            }
            24..=27 => Call::Link(self.loc(x).await, self.dir(x).await, self.name()),
            28..=33 => {
                let (p, n) = self.entry(x).await;
                Call::Unlink(p, n)
            }
            34..=37 => {
                // the deepest directories are the ones that may be empty
                let (p, n) = self.entry_from(x, true, 0).await;
                Call::Rmdir(p, n)
            }
            38..=45 => {
                let (p, n) = self.entry(x).await;
                let (np, nn) = (self.dir(x).await, self.name());
                Call::Rename(p, n, np, nn, self.rename_flags())
            }
            46..=51 => {
                let (p, n) = self.entry(x).await;
                Call::Lookup(p, n)
            }
            52..=57 => Call::Getattr(self.loc(x).await),
            58..=63 => Call::Setattr(self.loc(x).await, self.setattr()),
            64..=65 => Call::Readlink(self.loc(x).await),
            66..=69 => {
                let flags = [
                    libc::O_RDONLY,
                    libc::O_WRONLY,
                    libc::O_RDWR | libc::O_TRUNC,
                    libc::O_WRONLY | libc::O_TRUNC,
                    libc::O_RDONLY | libc::O_TRUNC,
                    libc::O_RDWR | libc::O_APPEND,
                ];
                Call::Open(self.loc(x).await, self.pick(&flags))
            }
            70..=72 => Call::Release(self.loc(x).await),
            73..=80 => {
                let off = if self.chance(30) { 0 } else { self.rng.random_range(0..20_000) };
                let size = if self.chance(2) { memory::MAX_READ + 1 } else { self.rng.random_range(0..12_000) };
                Call::Read(self.loc(x).await, off, size)
            }
            81..=88 => {
                let off = if self.chance(30) { 0 } else { self.rng.random_range(0..16_000) };
                let len = self.rng.random_range(0..6_000);
                Call::Write(self.loc(x).await, off, len, self.rng.random())
            }
            89..=90 => {
                let src = self.loc(x).await;
                // within one file a third of the time (overlapping: EINVAL)
                let dst = if self.chance(33) { src.clone() } else { self.loc(x).await };
                let spans = (0..self.rng.random_range(0..4))
                    .map(|_| CopySpan {
                        src: self.rng.random_range(0..16_000),
                        dst: self.rng.random_range(0..16_000),
                        len: self.rng.random_range(0..6_000),
                    })
                    .collect();
                Call::CopyRange(src, dst, spans)
            }
            91 => Call::Flush(self.loc(x).await),
            92..=93 => {
                let l = self.loc(x).await;
                match x.getattr(&l).await {
                    Ok(a) if a.kind.is_special() => Call::Getattr(l),
                    _ => Call::Fsync(l, self.chance(50)),
                }
            }
            94..=96 => {
                let page = self.rng.random_range(1..6);
                Call::Readdir(self.dir(x).await, page, self.chance(50))
            }
            97 => Call::Names(self.dir(x).await, self.rng.random_range(1..6)),
            98 => Call::Statfs,
            99..=102 => {
                let (l, n) = (self.loc(x).await, self.xattr_name());
                let v = (0..self.rng.random_range(0..40)).map(|_| self.rng.random()).collect();
                Call::Setxattr(l, n, v, self.xattr_flags())
            }
            103..=106 => Call::Getxattr(self.loc(x).await, self.xattr_name()),
            107..=108 => Call::Listxattr(self.loc(x).await),
            109..=111 => Call::Removexattr(self.loc(x).await, self.xattr_name()),
            112..=113 => {
                let mut locs = Vec::new();
                for _ in 0..self.rng.random_range(0..6) {
                    locs.push(self.loc(x).await);
                }
                Call::Getattrs(locs)
            }
            114..=117 => {
                let modes = [0, libc::FALLOC_FL_KEEP_SIZE, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE];
                let modes = [&modes[..], &[libc::FALLOC_FL_ZERO_RANGE, libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE]].concat();
                let mode = FallocMode::from_linux(self.pick(&modes)).expect("a mode FUSE passes");
                // a few extents in file order, as stripe sends them (now
                // and then an empty one, which both refuse)
                let mut at = self.rng.random_range(0..8_000);
                let mut ranges = Vec::new();
                for _ in 0..self.rng.random_range(1..4) {
                    let len = if self.chance(3) { 0 } else { self.rng.random_range(1..6_000) };
                    ranges.push(Extent { offset: at, len });
                    at += len + self.rng.random_range(0..4_000);
                }
                Call::Fallocate(self.loc(x).await, mode, ranges)
            }
            // symlinks and special files as another user than root
            _ => Call::Lookup(self.dir(x).await, self.name()),
        }
    }
}
