//! One operation with its arguments, run against a translator, answered as
//! a string that keeps what both leaves must agree on.

use bytes::Bytes;
use std::sync::Arc;
use xlator::*;

#[derive(Debug, Clone)]
pub enum Call {
    Lookup(Loc, String),
    Getattr(Loc),
    Setattr(Loc, SetAttr),
    Readlink(Loc),
    Mknod(Loc, NewFile, u32, u32),
    Mkdir(Loc, NewFile),
    Create(Loc, NewFile, i32),
    Symlink(Loc, NewFile, String),
    Link(Loc, Loc, String),
    Unlink(Loc, String),
    Rmdir(Loc, String),
    Rename(Loc, String, Loc, String, RenameFlags),
    Open(Loc, i32),
    Release(Loc),
    Read(Loc, u64, u32),
    /// offset, length, and a seed for the bytes (keeps the log short)
    Write(Loc, u64, usize, u8),
    CopyRange(Loc, Loc, Vec<CopySpan>),
    Flush(Loc),
    Fsync(Loc, bool),
    /// page size, plus
    Readdir(Loc, u32, bool),
    /// a whole listing of names, in pages of this many
    Names(Loc, u32),
    Statfs,
    Setxattr(Loc, String, Vec<u8>, XattrFlags),
    Getxattr(Loc, String),
    Listxattr(Loc),
    Removexattr(Loc, String),
    Getattrs(Vec<Loc>),
    Fallocate(Loc, FallocMode, Vec<Extent>),
}

pub fn payload(len: usize, seed: u8) -> Bytes {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// The attributes both leaves must agree on (not times, not allocation,
/// not a directory's size).
pub fn attr(a: &Attr) -> String {
    let size = if a.kind == FileKind::Dir { "-".to_string() } else { a.size.to_string() };
    format!(
        "[{:?} {:?} size={size} perm={:o} nlink={} own={}:{} rdev={}]",
        a.fid, a.kind, a.perm, a.nlink, a.uid, a.gid, a.rdev
    )
}

/// A directory's attributes just after a change in it, as the answer
/// carries them: both leaves give them.
fn dir_after(d: &Option<Attr>) -> String {
    format!("dir after {:?}", d.as_ref().map(attr))
}

fn made(m: &Made) -> String {
    format!("{} {}", attr(&m.attr), dir_after(&m.dir))
}

fn removed(r: &Removed) -> String {
    format!("removed {:?} remaining {:?} {}", r.fid, r.remaining.as_ref().map(attr), dir_after(&r.dir))
}

fn show(r: FsResult<String>) -> String {
    match r {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("{e:?}"),
    }
}

/// A whole listing, `page` entries per call, continuing from each last
/// entry's cookie.
pub async fn list(x: &Arc<dyn Translator>, dir: &Loc, page: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
    let (mut out, mut cookie) = (Vec::new(), 0);
    for _ in 0..10_000 {
        let got = x.readdir(dir, cookie, page, plus).await?;
        let Some(last) = got.last() else { return Ok(out) };
        cookie = last.next;
        out.extend(got);
    }
    panic!("a listing of {dir:?} never ended");
}

/// Every name of `dir` by `names`, `page` at a time (the cookies are each
/// file system's own: only the names are compared).
pub async fn names(x: &Arc<dyn Translator>, dir: &Loc, page: u32) -> FsResult<Vec<String>> {
    let (mut out, mut cookie) = (Vec::new(), 0);
    for _ in 0..10_000 {
        let got = x.names(dir, cookie, page).await?;
        let Some(last) = got.last() else { return Ok(out) };
        cookie = last.next;
        out.extend(got.into_iter().map(|n| n.name));
    }
    panic!("a listing of {dir:?}'s names never ended");
}

impl Call {
    /// The operation this is a call of.
    pub fn fop(&self) -> Fop {
        match self {
            Call::Lookup(..) => Fop::Lookup,
            Call::Getattr(..) => Fop::Getattr,
            Call::Setattr(..) => Fop::Setattr,
            Call::Readlink(..) => Fop::Readlink,
            Call::Mknod(..) => Fop::Mknod,
            Call::Mkdir(..) => Fop::Mkdir,
            Call::Create(..) => Fop::Create,
            Call::Symlink(..) => Fop::Symlink,
            Call::Link(..) => Fop::Link,
            Call::Unlink(..) => Fop::Unlink,
            Call::Rmdir(..) => Fop::Rmdir,
            Call::Rename(..) => Fop::Rename,
            Call::Open(..) => Fop::Open,
            Call::Release(..) => Fop::Release,
            Call::Read(..) => Fop::Read,
            Call::Write(..) => Fop::Write,
            Call::CopyRange(..) => Fop::CopyRange,
            Call::Flush(..) => Fop::Flush,
            Call::Fsync(..) => Fop::Fsync,
            Call::Readdir(..) => Fop::Readdir,
            Call::Names(..) => Fop::Names,
            Call::Statfs => Fop::Statfs,
            Call::Setxattr(..) => Fop::Setxattr,
            Call::Getxattr(..) => Fop::Getxattr,
            Call::Listxattr(..) => Fop::Listxattr,
            Call::Removexattr(..) => Fop::Removexattr,
            Call::Getattrs(..) => Fop::Getattrs,
            Call::Fallocate(..) => Fop::Fallocate,
        }
    }

    pub async fn run(&self, x: &Arc<dyn Translator>) -> String {
        let r = match self {
            Call::Lookup(p, n) => x.lookup(p, n).await.map(|a| attr(&a)),
            Call::Getattr(l) => x.getattr(l).await.map(|a| attr(&a)),
            Call::Setattr(l, s) => x.setattr(l, s).await.map(|a| attr(&a)),
            Call::Readlink(l) => x.readlink(l).await,
            Call::Mknod(p, n, mode, rdev) => x.mknod(p, n, *mode, *rdev).await.map(|m| made(&m)),
            Call::Mkdir(p, n) => x.mkdir(p, n).await.map(|m| made(&m)),
            Call::Create(p, n, f) => x.create(p, n, *f).await.map(|m| made(&m)),
            Call::Symlink(p, n, t) => x.symlink(p, n, t).await.map(|m| made(&m)),
            Call::Link(l, p, n) => x.link(l, p, n).await.map(|m| made(&m)),
            Call::Unlink(p, n) => x.unlink(p, n).await.map(|r| removed(&r)),
            Call::Rmdir(p, n) => x.rmdir(p, n).await.map(|r| removed(&r)),
            Call::Rename(p, n, np, nn, f) => x
                .rename(p, n, np, nn, *f)
                .await
                .map(|r| format!("moved {:?} replaced {:?} {} new{}", r.moved, r.replaced.as_ref().map(removed), dir_after(&r.dir), dir_after(&r.newdir))),
            Call::Open(l, f) => x.open(l, *f).await.map(|()| String::new()),
            Call::Release(l) => x.release(l).await.map(|()| String::new()),
            Call::Read(l, off, size) => x.read(l, *off, *size).await.map(|d| format!("{d:?}")),
            Call::Write(l, off, len, seed) => x
                .write(l, *off, payload(*len, *seed))
                .await
                .map(|r| format!("wrote {} {:?}", r.written, r.attr.as_ref().map(attr))),
            Call::CopyRange(s, d, spans) => {
                x.copy_range(s, d, spans).await.map(|r| format!("copied {} {:?}", r.written, r.attr.as_ref().map(attr)))
            }
            Call::Flush(l) => x.flush(l).await.map(|()| String::new()),
            Call::Fsync(l, d) => x.fsync(l, *d).await.map(|()| String::new()),
            Call::Names(l, page) => names(x, l, *page).await.map(|mut v| {
                v.sort();
                v.join(", ")
            }),
            Call::Readdir(l, page, plus) => list(x, l, *page, *plus).await.map(|mut v| {
                v.sort_by(|a, b| a.name.cmp(&b.name));
                let v: Vec<String> =
                    v.iter().map(|e| format!("{} {:?} {:?} {:?}", e.name, e.kind, e.fid, e.attr.as_ref().map(attr))).collect();
                v.join(", ")
            }),
            // the numbers are each file system's own
            Call::Statfs => x.statfs(&Loc::root()).await.map(|_| String::new()),
            Call::Setxattr(l, n, v, f) => x.setxattr(l, n, v, *f).await.map(|()| String::new()),
            Call::Getxattr(l, n) => x.getxattr(l, n).await.map(|d| format!("{d:?}")),
            Call::Listxattr(l) => x.listxattr(l).await.map(|mut v| {
                v.sort();
                v.join(",")
            }),
            Call::Removexattr(l, n) => x.removexattr(l, n).await.map(|()| String::new()),
            Call::Fallocate(l, m, r) => x.fallocate(l, *m, r).await.map(|a| attr(&a)),
            Call::Getattrs(locs) => x.getattrs(locs).await.map(|v| {
                let v: Vec<String> = v.iter().map(|a| format!("{:?}", a.as_ref().map(attr))).collect();
                v.join(", ")
            }),
        };
        show(r)
    }
}
