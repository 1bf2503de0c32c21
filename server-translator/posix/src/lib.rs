//! # posix — the leaf translator: files in an export directory
//!
//! ```text
//!  protocol-server -> [server translators] -> posix -> export dir on a local FS
//! ```
//!
//! Layout of an export:
//!
//! ```text
//!  EXPORT/                    the volume's files, as users see them
//!  EXPORT/.imca/volume.json   the volume's cache config (see `volume`)
//!  EXPORT/.imca/fids/ab/<fid> one extra hard link per non-directory, by file id
//!  EXPORT/.imca/fids/ab/<fid>.dir  a marker per directory (its id is taken);
//!                                  its xattr user.imca.parent records where
//!                                  the directory is: parent id + name
//! ```
//!
//! Every file and directory carries its 128-bit file id in the xattr
//! `user.imca.fid` (symlinks and special files, which Linux does not allow
//! `user.*` xattrs on, use `trusted.imca.fid`). The per-fid hard links (the
//! GlusterFS `.glusterfs` idea) let data operations find a file by id even
//! after another gateway renamed it; the extra link is subtracted from the
//! nlink users see, and `.imca` and IMCa's xattrs (`*.imca.*`, see
//! [`xattr`]) are hidden from them and refused to them. Directories are
//! found by id too, through their marker's record and a table of open
//! directory fds ([`dirs`]), so nothing depends on a path's length: the
//! path a gateway sends is only a fallback (objects without a usable id or
//! record), opened a PATH_MAX-sized run at a time.
//!
//! Confinement: client paths are validated (no `..`, `.`, empty or over-long
//! components) and opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`;
//! names are then used only with `*at` calls and `O_NOFOLLOW`, so neither
//! `..` nor a symlink pointing out can reach outside the export.
//!
//! Trust: clients are gateways, but what they send is checked as if anyone
//! could send it. A new object's id must be new to this server ([`ids`]: a
//! create naming an id in use is EEXIST), and an [`ExportPolicy`] keeps
//! device nodes, set-id bits and (optionally) root ownership out of the
//! export. Space: the fd of a file whose last name goes away is closed at
//! once unless a gateway still has it open ([`FdCache`]).
//!
//! Task model: every call runs its syscalls on tokio's bounded blocking pool
//! (`spawn_blocking`); the only shared state is the fd cache (one short
//! mutex) — no global lock on the hot path.

mod copy;
mod data;
mod dirfds;
mod dirs;
mod fallocate;
mod fast;
mod fdcache;
mod ids;
mod namespace;
mod places;
mod policy;
mod sys;
mod translator;
mod xattr;

pub use dirfds::DEFAULT_DIR_FDS;
pub use dirs::MAX_CLIMB;
pub use places::PLACE_XATTR;
pub use fdcache::FdCache;
pub use policy::{ExportPolicy, NOBODY};
pub(crate) use ids::fid_link;
pub use xattr::{is_imca_xattr, CAPABILITY_XATTR};

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use sys::{err, raw, Stat};
use xlator::names::{check_path, is_hidden};
use xlator::{Attr, FileId, FileKind, Loc, Timestamp};

/// The directory inside the export that holds IMCa's own state (its name,
/// and the name and path checks that hide it, are xlator's `names`, shared
/// with the memory leaf).
pub use xlator::names::META_DIR;
pub const FID_XATTR: &str = "user.imca.fid";
/// Where ids of symlinks and special files live (`user.*` is refused there).
pub const FID_XATTR_TRUSTED: &str = "trusted.imca.fid";
pub const DEFAULT_FD_CACHE: usize = 4096;
/// Largest single read served (the transport's frame limit is larger).
pub const MAX_READ: u32 = 32 * 1024 * 1024;

/// The posix translator's state (shared with its blocking tasks).
pub struct Posix {
    export: PathBuf,
    root: OwnedFd,
    /// the root again, shared the way the walk of [`dirs`] holds directories
    root_dir: Arc<OwnedFd>,
    fids: OwnedFd,
    fds: FdCache,
    /// directory id → O_PATH fd (see [`dirs`])
    dir_fds: dirfds::DirFds,
    root_user: bool,
    policy: ExportPolicy,
    id_locks: ids::IdLocks,
    /// held by a create from before its name exists until its id is on it
    name_locks: ids::IdLocks,
    /// calls answered by the fast paths (see `fast`)
    fast_hits: std::sync::atomic::AtomicU64,
    /// `IMCA_POSIX_FAST=0` turns the fast paths off (to measure them)
    fast: bool,
    /// how long a file whose last name went stays reachable by id (see
    /// `fdcache`: opens on their way from gateways); zero = not at all
    removal_grace: std::time::Duration,
}

/// An object reached from a `Loc`: an `O_PATH` fd, its stat and its id.
pub(crate) struct Obj {
    fd: OwnedFd,
    st: Stat,
    fid: FileId,
    /// whether a per-fid hard link exists (and so counts in st_nlink)
    linked: bool,
}

impl Posix {
    /// Open (and on first use, prepare) an export directory, with the
    /// default (safe) [`ExportPolicy`].
    pub fn new(export: &Path, fd_cache: usize) -> io::Result<Posix> {
        Posix::with_policy(export, fd_cache, ExportPolicy::default())
    }

    pub fn with_policy(export: &Path, fd_cache: usize, policy: ExportPolicy) -> io::Result<Posix> {
        let root = sys::openat(libc::AT_FDCWD, &export.to_string_lossy(), libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("export {}: {e}", export.display())))?;
        let r = raw(&root);
        ensure_dir(r, META_DIR)?;
        let meta = sys::openat(r, META_DIR, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
        ensure_dir(raw(&meta), "fids")?;
        let fids = sys::openat(raw(&meta), "fids", libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
        for i in 0..256 {
            ensure_dir(raw(&fids), &format!("{i:02x}"))?;
        }
        let root_fid = FileId::ROOT.to_hex();
        match sys::setxattr(r, FID_XATTR, root_fid.as_bytes(), 0) {
            Ok(()) => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("export {}: cannot store file ids in xattrs: {e}", export.display()))),
        }
        let root_dir = Arc::new(root.try_clone()?);
        Ok(Posix { export: export.to_path_buf(), root, root_dir, fids, fds: FdCache::new(fd_cache), dir_fds: dirfds::DirFds::new(DEFAULT_DIR_FDS), root_user: sys::euid_is_root(), policy, id_locks: Default::default(), name_locks: Default::default(), fast_hits: Default::default(),
            fast: std::env::var("IMCA_POSIX_FAST").map_or(true, |v| v != "0"), removal_grace: std::time::Duration::ZERO })
    }

    /// Keep a removed file reachable by id for `grace` after its last name
    /// went (the storage server's kernel-cache lease); call
    /// [`Posix::expire_holds`] now and then to let go.
    pub fn with_removal_grace(mut self, grace: std::time::Duration) -> Posix {
        self.removal_grace = grace;
        self
    }

    pub fn removal_grace(&self) -> std::time::Duration {
        self.removal_grace
    }

    /// Close the removed files whose grace ended and nobody opened.
    pub fn expire_holds(&self) -> usize {
        self.fds.expire_holds(std::time::Instant::now())
    }

    pub fn export(&self) -> &Path {
        &self.export
    }

    /// Calls answered on the async thread without the blocking pool.
    pub fn fast_path_hits(&self) -> u64 {
        self.fast_hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Number of data fds held open right now.
    pub fn open_fds(&self) -> usize {
        self.fds.len()
    }

    /// Number of directory fds held right now (see [`dirs`]).
    pub fn open_dir_fds(&self) -> usize {
        self.dir_fds.len()
    }

    fn root_fd(&self) -> RawFd {
        raw(&self.root)
    }

    /// Resolve a location by its file id when it has one: a file through
    /// its hard link, a directory through its record ([`dirs`]) — both
    /// survive renames elsewhere and know no path length. Else (no id, or
    /// an object found by neither) by path beneath the root, checked
    /// against the id.
    pub(crate) fn resolve(&self, loc: &Loc) -> io::Result<Obj> {
        check_path(&loc.path)?;
        if loc.fid == Some(FileId::ROOT) || (loc.path.is_empty() && loc.fid.is_none()) {
            let fd = sys::open_beneath(self.root_fd(), "", libc::O_PATH | libc::O_DIRECTORY)?;
            let st = sys::fstat(raw(&fd))?;
            return Ok(Obj { fd, st, fid: FileId::ROOT, linked: false });
        }
        if let Some(fid) = loc.fid {
            if let Some(o) = self.by_id(fid)? {
                return Ok(o);
            }
        }
        let fd = sys::open_beneath_long(self.root_fd(), &loc.path, libc::O_PATH | libc::O_NOFOLLOW)?;
        let obj = if loc.path.is_empty() {
            let st = sys::fstat(raw(&fd))?;
            Obj { fd, st, fid: FileId::ROOT, linked: false }
        } else {
            self.obj(fd)?
        };
        if let Some(want) = loc.fid {
            if want != obj.fid {
                // The name now holds another file: the one asked for is gone.
                return Err(err(libc::ENOENT));
            }
            if kind_of(&obj.st) == FileKind::Dir {
                // Asked for by id but not found by it: an export from before
                // records, or a record gone stale. Write what the path found.
                self.repair_place(&loc.path, &obj);
            }
        }
        Ok(obj)
    }

    /// The object with id `fid` found by id alone, `None` when it cannot be.
    fn by_id(&self, fid: FileId) -> io::Result<Option<Obj>> {
        if let Some(o) = self.cached_dir_obj(fid) {
            return Ok(Some(o));
        }
        match sys::openat(raw(&self.fids), &fid_link(fid), libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => {
                let st = sys::fstat(raw(&fd))?;
                return Ok(Some(Obj { fd, st, fid, linked: true }));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                if let Some(o) = self.unlinked_but_open(fid)? {
                    return Ok(Some(o));
                }
            }
            Err(e) => return Err(e),
        }
        let Some(fd) = self.dir_by_id(fid)? else { return Ok(None) };
        let st = sys::fstat(raw(&fd))?;
        Ok(Some(Obj { fd, st, fid, linked: false }))
    }

    /// Record where directory `o`, found at `path`, is (see [`dirs`]).
    fn repair_place(&self, path: &str, o: &Obj) {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        match sys::open_beneath_long(self.root_fd(), parent, libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW) {
            Ok(p) => {
                tracing::debug!(fid = %o.fid, "recording a directory's place, found by path");
                self.record_place(o.fid, &p, name);
                self.remember_dir(o.fid, &o.fd);
            }
            Err(e) => tracing::debug!(fid = %o.fid, "cannot reopen a directory's parent to record its place: {e}"),
        }
    }

    /// A file whose last name is gone but whose fd is still cached (an
    /// unlinked open file): reachable by id until released.
    fn unlinked_but_open(&self, fid: FileId) -> io::Result<Option<Obj>> {
        let Some(data) = self.fds.get(fid) else { return Ok(None) };
        let st = sys::fstat(raw(&data))?;
        if st.st_nlink != 0 {
            return Ok(None);
        }
        let fd = data.try_clone()?;
        Ok(Some(Obj { fd, st, fid, linked: false }))
    }

    /// A gateway closed the file: once nobody has it open, the cached fd of
    /// a file with no name left is closed (which frees its space).
    pub(crate) fn release_fid(&self, fid: FileId) -> io::Result<()> {
        if self.fds.released(fid) > 0 {
            return Ok(());
        }
        if let Some(data) = self.fds.get(fid) {
            if sys::fstat(raw(&data))?.st_nlink == 0 {
                // (unless a removal hold still keeps it)
                self.fds.forget_unless_open(fid);
            }
        }
        Ok(())
    }

    /// Resolve a location that must be a directory.
    pub(crate) fn resolve_dir(&self, loc: &Loc) -> io::Result<Obj> {
        let o = self.resolve(loc)?;
        if kind_of(&o.st) != FileKind::Dir {
            return Err(err(libc::ENOTDIR));
        }
        Ok(o)
    }

    /// `name` inside directory `dir` (not following a symlink).
    pub(crate) fn child(&self, dir: &Obj, name: &str) -> io::Result<Obj> {
        if is_hidden(dir.fid, name) {
            return Err(err(libc::ENOENT));
        }
        let fd = sys::openat(raw(&dir.fd), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        self.obj_named(fd, Some((dir, name)))
    }

    /// [`Posix::child`] for a caller that holds `name`'s create lock.
    pub(crate) fn child_holding_name(&self, dir: &Obj, name: &str) -> io::Result<Obj> {
        let fd = sys::openat(raw(&dir.fd), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        self.obj(fd)
    }

    /// Build an `Obj` for an fd, assigning an id to a file that has none
    /// (created behind IMCa's back).
    fn obj(&self, fd: OwnedFd) -> io::Result<Obj> {
        self.obj_named(fd, None)
    }

    /// [`Posix::obj`] for `name` in `dir`: an object without an id may be
    /// one a create is still making (the name exists before its id is
    /// stamped on it), so its create lock is awaited and the id read again
    /// before one is assigned; else a racing create of the same name would
    /// be answered with an id of our making and then re-stamped.
    fn obj_named(&self, fd: OwnedFd, name: Option<(&Obj, &str)>) -> io::Result<Obj> {
        let st = sys::fstat(raw(&fd))?;
        let kind = kind_of(&st);
        let mut fid = read_fid(raw(&fd), kind)?;
        let _creating = match (fid, name) {
            (None, Some((dir, name))) => {
                let g = self.lock_name(dir, name);
                fid = read_fid(raw(&fd), kind)?;
                Some(g)
            }
            _ => None,
        };
        match fid {
            Some(fid) => Ok(Obj { fd, st, fid, linked: kind != FileKind::Dir && fid != FileId::ROOT }),
            None => {
                let place = name.map(|(dir, n)| places::Place { parent: dir.fid, name: n.to_string() });
                let (fid, linked) = self.assign_fid(raw(&fd), kind, &st, place.as_ref())?;
                let st = if linked { sys::fstat(raw(&fd))? } else { st };
                Ok(Obj { fd, st, fid, linked })
            }
        }
    }

    fn assign_fid(&self, fd: RawFd, kind: FileKind, st: &Stat, place: Option<&places::Place>) -> io::Result<(FileId, bool)> {
        let fid = FileId::from_random(sys::random_u128());
        match sys::setxattr(fd, fid_xattr(kind), fid.to_hex().as_bytes(), libc::XATTR_CREATE) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                // Someone else assigned one meanwhile: use theirs.
                let fid = read_fid(fd, kind)?.ok_or_else(|| err(libc::EIO))?;
                return Ok((fid, kind != FileKind::Dir));
            }
            Err(e) => {
                // No xattr support for this kind here (e.g. trusted.* without
                // root): derive a stable id from the inode instead.
                tracing::debug!("cannot store a file id ({e}); deriving one from the inode");
                let fid = FileId(((st.st_dev as u128) << 64 | st.st_ino as u128) | (1u128 << 126));
                return Ok((fid, false));
            }
        }
        if kind == FileKind::Dir {
            // Best effort: a fresh random id cannot be in use, the marker
            // only keeps later creates from taking it.
            if let Err(e) = self.claim_dir_fid(fid, place) {
                tracing::warn!(%fid, "cannot mark a directory's id as taken: {e}");
            }
            return Ok((fid, false));
        }
        self.link_fid(fd, fid)?;
        Ok((fid, true))
    }

    pub(crate) fn attr(&self, o: &Obj) -> Attr {
        attr_of(&o.st, o.fid, o.linked)
    }

    /// Refresh an object's stat after a change.
    pub(crate) fn restat(&self, o: &mut Obj) -> io::Result<Attr> {
        o.st = sys::fstat(raw(&o.fd))?;
        Ok(self.attr(o))
    }
}

fn ensure_dir(dir: RawFd, name: &str) -> io::Result<()> {
    match sys::mkdirat(dir, name, 0o700) {
        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => Err(e),
        _ => Ok(()),
    }
}

fn fid_xattr(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File | FileKind::Dir => FID_XATTR,
        _ => FID_XATTR_TRUSTED,
    }
}

fn read_fid(fd: RawFd, kind: FileKind) -> io::Result<Option<FileId>> {
    let mut buf = [0u8; 64];
    match sys::getxattr(fd, fid_xattr(kind), &mut buf) {
        Ok(n) => Ok(std::str::from_utf8(&buf[..n]).ok().and_then(FileId::from_hex)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENODATA) | Some(libc::ENOTSUP) | Some(libc::EPERM)) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn kind_of(st: &Stat) -> FileKind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => FileKind::File,
        libc::S_IFDIR => FileKind::Dir,
        libc::S_IFLNK => FileKind::Symlink,
        libc::S_IFCHR => FileKind::CharDev,
        libc::S_IFBLK => FileKind::BlockDev,
        libc::S_IFSOCK => FileKind::Socket,
        // S_IFIFO (and any type Linux may add) shows as a fifo: a node with
        // no data, which is what the pipeline can do with it.
        _ => FileKind::Fifo,
    }
}

fn attr_of(st: &Stat, fid: FileId, linked: bool) -> Attr {
    let kind = kind_of(st);
    let mut nlink = st.st_nlink as u32;
    if linked {
        nlink = nlink.saturating_sub(1).max(1);
    }
    if fid == FileId::ROOT {
        nlink = nlink.saturating_sub(1).max(2); // the hidden .imca directory
    }
    let ts = |s: i64, n: i64| Timestamp { secs: s, nsecs: n as u32 };
    Attr {
        fid,
        kind,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        perm: st.st_mode & 0o7777,
        nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        atime: ts(st.st_atime, st.st_atime_nsec),
        mtime: ts(st.st_mtime, st.st_mtime_nsec),
        ctime: ts(st.st_ctime, st.st_ctime_nsec),
    }
}

impl Posix {
    pub(crate) fn fds(&self) -> &FdCache {
        &self.fds
    }
    pub(crate) fn root_user(&self) -> bool {
        self.root_user
    }
    pub(crate) fn policy(&self) -> &ExportPolicy {
        &self.policy
    }
    pub fn meta_path(&self) -> PathBuf {
        self.export.join(META_DIR)
    }
}

pub use translator::PosixTranslator;

/// Convenience: the posix leaf for `export` as a translator.
pub fn posix(export: &Path, fd_cache: usize) -> io::Result<Arc<PosixTranslator>> {
    Ok(Arc::new(PosixTranslator::new(Posix::new(export, fd_cache)?)))
}
