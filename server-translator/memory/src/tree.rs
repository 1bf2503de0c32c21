//! The tree: an inode table keyed by file id, and how a `Loc` or a name
//! reaches an inode — with posix's checks (xlator's `names`), in posix's
//! order, so both leaves fail the same call with the same errno.

use crate::dir::Dir;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::collections::hash_map::Entry;
use std::time::{SystemTime, UNIX_EPOCH};
use xlator::*;

/// What a directory reports as its size (ext4's for a small directory).
const DIR_SIZE: u64 = 4096;

pub(crate) enum Content {
    File(Vec<u8>),
    Dir(Dir),
    Symlink(String),
    /// fifo, socket or device node (its device number is `Inode::rdev`)
    Special(FileKind),
}

pub(crate) struct Inode {
    pub content: Content,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    /// names of a non-directory (directories: see `Fs::attr`)
    pub links: u32,
    /// a directory's parent (for rename's ancestor rules)
    pub parent: FileId,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub xattrs: BTreeMap<String, Vec<u8>>,
}

impl Inode {
    pub fn new(content: Content, perm: u32, owner: Owner, parent: FileId) -> Inode {
        let t = now();
        Inode {
            content,
            perm: perm & 0o7777,
            uid: owner.uid,
            gid: owner.gid,
            rdev: 0,
            links: 1,
            parent,
            atime: t,
            mtime: t,
            ctime: t,
            xattrs: BTreeMap::new(),
        }
    }

    pub fn kind(&self) -> FileKind {
        match self.content {
            Content::File(_) => FileKind::File,
            Content::Dir(_) => FileKind::Dir,
            Content::Symlink(_) => FileKind::Symlink,
            Content::Special(k) => k,
        }
    }

    pub fn dir(&self) -> Option<&Dir> {
        match &self.content {
            Content::Dir(d) => Some(d),
            _ => None,
        }
    }

    pub fn dir_mut(&mut self) -> Option<&mut Dir> {
        match &mut self.content {
            Content::Dir(d) => Some(d),
            _ => None,
        }
    }

    pub fn touch_ctime(&mut self) {
        self.ctime = now();
    }

    /// Data or entries changed.
    pub fn touch_mtime(&mut self) {
        let t = now();
        self.mtime = t;
        self.ctime = t;
    }
}

pub(crate) struct Fs {
    pub inodes: HashMap<FileId, Inode>,
    /// Files posix would hold a cached fd for (found by id first, whatever
    /// the path says).
    pub cached: HashSet<FileId>,
    /// Opens not yet released, per file: a file with opens outlives its last
    /// name until the last release; one without is gone with its name.
    pub opens: HashMap<FileId, u32>,
}

pub(crate) fn now() -> Timestamp {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    Timestamp { secs: d.as_secs() as i64, nsecs: d.subsec_nanos() }
}

pub(crate) fn err<T>(e: i32) -> FsResult<T> {
    Err(FsError(e))
}

/// posix's default export policy (`nosuid`): set-user-id and set-group-id
/// bits are dropped from every mode a client sets.
pub(crate) fn allowed_perm(asked: u32) -> u32 {
    asked & 0o7777 & !(libc::S_ISUID | libc::S_ISGID)
}

impl Fs {
    pub fn new() -> Fs {
        let mut root = Inode::new(Content::Dir(Dir::default()), 0o755, Owner::default(), FileId::ROOT);
        root.links = 0;
        Fs { inodes: HashMap::from([(FileId::ROOT, root)]), cached: HashSet::new(), opens: HashMap::new() }
    }

    pub fn inode(&self, fid: FileId) -> &Inode {
        &self.inodes[&fid]
    }

    pub fn inode_mut(&mut self, fid: FileId) -> &mut Inode {
        self.inodes.get_mut(&fid).expect("a resolved id is in the table")
    }

    pub fn dir(&self, fid: FileId) -> &Dir {
        self.inode(fid).dir().expect("a resolved directory")
    }

    pub fn dir_mut(&mut self, fid: FileId) -> &mut Dir {
        self.inode_mut(fid).dir_mut().expect("a resolved directory")
    }

    /// Resolve a location: by its id when the id is known (posix's per-fid
    /// link of a file, or record of a directory, which survive renames
    /// elsewhere), else by path, checked against the id.
    pub fn resolve(&self, loc: &Loc) -> FsResult<FileId> {
        names::check_path(&loc.path)?;
        if loc.fid == Some(FileId::ROOT) || (loc.path.is_empty() && loc.fid.is_none()) {
            return Ok(FileId::ROOT);
        }
        if let Some(fid) = loc.fid {
            if self.inodes.contains_key(&fid) {
                return Ok(fid);
            }
        }
        let found = self.walk(&loc.path)?;
        match loc.fid {
            // The name now holds another file: the one asked for is gone.
            Some(want) if want != found => err(libc::ENOENT),
            _ => Ok(found),
        }
    }

    /// Resolve a location that must be a directory.
    pub fn resolve_dir(&self, loc: &Loc) -> FsResult<FileId> {
        let fid = self.resolve(loc)?;
        if self.inode(fid).kind() != FileKind::Dir {
            return err(libc::ENOTDIR);
        }
        Ok(fid)
    }

    /// A validated path from the root; no symlink may be crossed (posix
    /// opens with RESOLVE_NO_SYMLINKS), a trailing one is the result.
    fn walk(&self, path: &str) -> FsResult<FileId> {
        let mut at = FileId::ROOT;
        if path.is_empty() {
            return Ok(at);
        }
        for c in path.split('/') {
            match &self.inode(at).content {
                Content::Dir(d) => at = d.get(c).ok_or(FsError::ENOENT)?.fid,
                Content::Symlink(_) => return err(libc::ELOOP),
                _ => return err(libc::ENOTDIR),
            }
        }
        Ok(at)
    }

    /// `name` inside directory `dir`.
    pub fn child(&self, dir: FileId, name: &str) -> FsResult<FileId> {
        if names::is_hidden(dir, name) {
            return err(libc::ENOENT);
        }
        Ok(self.dir(dir).get(name).ok_or(FsError::ENOENT)?.fid)
    }

    /// Whether `a` is `b` or one of its ancestors (both directories).
    pub fn is_ancestor_or_self(&self, a: FileId, mut b: FileId) -> bool {
        loop {
            if a == b {
                return true;
            }
            if b == FileId::ROOT {
                return false;
            }
            b = self.inode(b).parent;
        }
    }

    pub fn attr(&self, fid: FileId) -> Attr {
        let i = self.inode(fid);
        let (size, nlink) = match &i.content {
            Content::File(d) => (d.len() as u64, i.links),
            Content::Dir(d) => (DIR_SIZE, 2 + d.subdirs()),
            Content::Symlink(t) => (t.len() as u64, i.links),
            Content::Special(_) => (0, i.links),
        };
        Attr {
            fid,
            kind: i.kind(),
            size,
            // every byte allocated: nothing is sparse here
            blocks: size.div_ceil(512),
            perm: i.perm,
            nlink,
            uid: i.uid,
            gid: i.gid,
            rdev: i.rdev,
            atime: i.atime,
            mtime: i.mtime,
            ctime: i.ctime,
        }
    }

    /// Add a new object under `dir` as `name`.
    pub fn add(&mut self, dir: FileId, name: &str, fid: FileId, inode: Inode) {
        let is_dir = inode.kind() == FileKind::Dir;
        self.inodes.insert(fid, inode);
        let d = self.inode_mut(dir);
        d.touch_mtime();
        d.dir_mut().expect("a resolved directory").insert(name, fid, is_dir);
    }

    /// One name of a non-directory went away: its attributes if names
    /// remain; else `None`, and it is forgotten unless it is open.
    pub fn unlinked(&mut self, fid: FileId) -> Option<Attr> {
        let i = self.inode_mut(fid);
        i.links -= 1;
        i.touch_ctime();
        if i.links > 0 {
            return Some(self.attr(fid));
        }
        if !self.opens.contains_key(&fid) {
            self.forget(fid);
        }
        None
    }

    /// A file was opened (open or create): cached, and counted.
    pub fn opened(&mut self, fid: FileId) {
        self.cached.insert(fid);
        *self.opens.entry(fid).or_insert(0) += 1;
    }

    /// A release: one open less (never below none); the last one of a file
    /// with no name left forgets it.
    pub fn released(&mut self, fid: FileId) {
        if let Entry::Occupied(mut e) = self.opens.entry(fid) {
            *e.get_mut() -= 1;
            if *e.get() > 0 {
                return;
            }
            e.remove();
        }
        if self.cached.contains(&fid) && self.inodes.get(&fid).is_some_and(|i| i.links == 0) {
            self.forget(fid);
        }
    }

    fn forget(&mut self, fid: FileId) {
        self.inodes.remove(&fid);
        self.cached.remove(&fid);
        self.opens.remove(&fid);
    }

    /// posix's rule for the id of a new object: the shape gateways draw
    /// (EINVAL otherwise), and not in use (EEXIST), an unlinked open file
    /// and the root included.
    pub fn check_new_fid(&self, fid: FileId) -> FsResult<()> {
        if fid.0 >> 127 != 1 {
            return err(libc::EINVAL);
        }
        if self.inodes.contains_key(&fid) {
            return err(libc::EEXIST);
        }
        Ok(())
    }
}
