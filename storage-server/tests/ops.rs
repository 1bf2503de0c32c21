//! Every file operation, and its error cases, through
//! protocol-client -> TCP -> protocol-server -> posix on a real temp export.

mod common;
use bytes::Bytes;
use common::*;
use std::os::unix::fs::MetadataExt;
use xlator::*;

#[tokio::test]
async fn lookup_getattr_and_their_errors() {
    let e = env().await;
    let c = &e.c;
    let r = c.getattr(&root()).await.unwrap();
    assert_eq!((r.fid, r.kind), (FileId::ROOT, FileKind::Dir));
    assert_eq!(r.nlink, 2, "the hidden .imca dir is not counted");
    assert_eq!(c.lookup(&root(), "nope").await.unwrap_err(), FsError::ENOENT);
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    assert_eq!(c.lookup(&path("f"), "x").await.unwrap_err(), FsError::ENOTDIR);
    assert_eq!(c.lookup(&root(), &"n".repeat(256)).await.unwrap_err(), FsError::ENAMETOOLONG);
    assert_eq!(c.create(&root(), &nf(&"n".repeat(256)), 0).await.unwrap_err(), FsError::ENAMETOOLONG);
    assert_eq!(c.getattr(&path("missing/x")).await.unwrap_err(), FsError::ENOENT);
    // By id, with a stale path: still found.
    let a = c.getattr(&at("elsewhere", f.fid)).await.unwrap();
    assert_eq!(a.fid, f.fid);
    // An id that does not exist, with a path naming another file: ENOENT.
    assert_eq!(c.getattr(&at("f", fid())).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.getattr(&at("", fid())).await.unwrap_err(), FsError::ENOENT);
}

#[tokio::test]
async fn create_mkdir_and_exclusivity() {
    let e = env().await;
    let c = &e.c;
    let d = NewFile { perm: 0o750, owner: Owner { uid: 1234, gid: 4321 }, ..nf("dir") };
    let a = c.mkdir(&root(), &d).await.unwrap().attr;
    assert_eq!((a.kind, a.perm, a.uid, a.gid, a.fid), (FileKind::Dir, 0o750, 1234, 4321, d.fid));
    assert_eq!(c.mkdir(&root(), &nf("dir")).await.unwrap_err(), FsError::EEXIST);
    let f = NewFile { perm: 0o600, ..nf("a") };
    let a = c.create(&path("dir"), &f, libc::O_RDWR).await.unwrap().attr;
    assert_eq!((a.kind, a.perm, a.size, a.nlink), (FileKind::File, 0o600, 0, 1));
    assert_eq!(c.create(&path("dir"), &nf("a"), 0).await.unwrap_err(), FsError::EEXIST);
    // Not exclusive: opens the existing file, keeps its id, O_TRUNC truncates.
    c.write(&at("dir/a", f.fid), 0, Bytes::from_static(b"12345")).await.unwrap();
    let again = NewFile { exclusive: false, ..nf("a") };
    let a = c.create(&path("dir"), &again, libc::O_RDWR).await.unwrap().attr;
    assert_eq!((a.fid, a.size), (f.fid, 5));
    let a = c.create(&path("dir"), &again, libc::O_RDWR | libc::O_TRUNC).await.unwrap().attr;
    assert_eq!((a.fid, a.size), (f.fid, 0));
    assert_eq!(c.create(&root(), &NewFile { exclusive: false, ..nf("dir") }, 0).await.unwrap_err(), FsError::EISDIR);
    assert_eq!(c.create(&path("nodir"), &nf("x"), 0).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.create(&path("dir/a"), &nf("x"), 0).await.unwrap_err(), FsError::ENOTDIR);
    // The id is stored with the file, and the per-fid link exists.
    let x = xattr_of(&e.export.join("dir/a"), "user.imca.fid");
    assert_eq!(x, f.fid.to_hex());
    let h = f.fid.to_hex();
    let link = e.export.join(".imca/fids").join(&h[30..]).join(&h);
    assert_eq!(std::fs::metadata(&link).unwrap().ino(), std::fs::metadata(e.export.join("dir/a")).unwrap().ino());
}

#[tokio::test]
async fn setattr_chmod_chown_truncate_utimens() {
    // Set-id bits are dropped by default (client_trust.rs): allowed here.
    let e = env_with(|a| a.allow_setid = true).await;
    let c = &e.c;
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    let l = at("f", f.fid);
    let a = c.setattr(&l, &SetAttr { perm: Some(0o4711), ..Default::default() }).await.unwrap();
    assert_eq!(a.perm, 0o4711);
    let a = c.setattr(&l, &SetAttr { uid: Some(77), gid: Some(88), ..Default::default() }).await.unwrap();
    assert_eq!((a.uid, a.gid), (77, 88));
    let a = c.setattr(&l, &SetAttr { size: Some(10_000), ..Default::default() }).await.unwrap();
    assert_eq!(a.size, 10_000);
    assert_eq!(c.read(&l, 0, 20_000).await.unwrap(), Bytes::from(vec![0u8; 10_000]));
    let a = c.setattr(&l, &SetAttr { size: Some(3), ..Default::default() }).await.unwrap();
    assert_eq!(a.size, 3);
    let t = Timestamp { secs: 1_000_000_000, nsecs: 123_456_789 };
    let a = c
        .setattr(&l, &SetAttr { atime: Some(TimeSet::At(t)), mtime: Some(TimeSet::At(t)), ..Default::default() })
        .await
        .unwrap();
    assert_eq!((a.atime, a.mtime), (t, t));
    let a = c.setattr(&l, &SetAttr { mtime: Some(TimeSet::Now), ..Default::default() }).await.unwrap();
    assert!(a.mtime.secs > t.secs && a.atime == t);
    c.mkdir(&root(), &nf("d")).await.unwrap();
    assert_eq!(c.setattr(&path("d"), &SetAttr { size: Some(0), ..Default::default() }).await.unwrap_err(), FsError::EISDIR);
    assert_eq!(c.setattr(&path("zz"), &SetAttr::default()).await.unwrap_err(), FsError::ENOENT);
}

#[tokio::test]
async fn symlink_readlink_mknod() {
    let e = env().await;
    let c = &e.c;
    let s = nf("ln");
    let a = c.symlink(&root(), &s, "some/target").await.unwrap().attr;
    assert_eq!((a.kind, a.fid, a.size), (FileKind::Symlink, s.fid, 11));
    assert_eq!(c.readlink(&path("ln")).await.unwrap(), "some/target");
    assert_eq!(c.readlink(&at("renamed-away", s.fid)).await.unwrap(), "some/target");
    assert_eq!(c.lookup(&root(), "ln").await.unwrap().fid, s.fid, "symlinks keep their id");
    assert_eq!(c.symlink(&root(), &nf("ln"), "x").await.unwrap_err(), FsError::EEXIST);
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    assert_eq!(c.readlink(&path("f")).await.unwrap_err(), FsError::EINVAL);
    let p = nf("fifo");
    let a = c.mknod(&root(), &p, libc::S_IFIFO, 0).await.unwrap().attr;
    assert_eq!((a.kind, a.fid), (FileKind::Fifo, p.fid));
    assert!(std::fs::symlink_metadata(e.export.join("fifo")).unwrap().file_type().is_fifo_like());
    assert_eq!(c.lookup(&root(), "fifo").await.unwrap().fid, p.fid);
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}
impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_fifo()
    }
}

#[tokio::test]
async fn link_unlink_and_nlink_accounting() {
    let e = env().await;
    let c = &e.c;
    let f = nf("a");
    c.create(&root(), &f, 0).await.unwrap();
    c.mkdir(&root(), &nf("d")).await.unwrap();
    let a = c.link(&at("a", f.fid), &path("d"), "b").await.unwrap().attr;
    assert_eq!((a.fid, a.nlink), (f.fid, 2));
    assert_eq!(c.lookup(&path("d"), "b").await.unwrap().nlink, 2);
    assert_eq!(c.link(&path("a"), &path("d"), "b").await.unwrap_err(), FsError::EEXIST);
    assert_eq!(c.link(&path("d"), &root(), "dl").await.unwrap_err(), FsError::EPERM);
    let r = c.unlink(&root(), "a").await.unwrap();
    assert_eq!(r.fid, f.fid);
    assert_eq!(r.remaining.unwrap().nlink, 1);
    // Data ops by id still reach the file through its other name.
    c.write(&at("a", f.fid), 0, Bytes::from_static(b"xyz")).await.unwrap();
    assert_eq!(std::fs::read(e.export.join("d/b")).unwrap(), b"xyz");
    let r = c.unlink(&path("d"), "b").await.unwrap();
    assert!(r.remaining.is_none());
    let h = f.fid.to_hex();
    assert!(!e.export.join(".imca/fids").join(&h[30..]).join(&h).exists(), "per-fid link removed with the last name");
    // Like an open file on a local FS, the unlinked file stays usable by id
    // until released (and its removal hold, two kernel leases, ran out:
    // an open may be on its way from a gateway); then it is gone and its
    // space freed.
    assert_eq!(&c.read(&at("d/b", f.fid), 0, 10).await.unwrap()[..], b"xyz");
    assert_eq!(c.getattr(&at("d/b", f.fid)).await.unwrap().nlink, 0);
    c.release(&at("d/b", f.fid)).await.unwrap();
    common::gone_by_id(c, &at("d/b", f.fid)).await;
    assert_eq!(c.read(&at("d/b", f.fid), 0, 10).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.getattr(&at("d/b", f.fid)).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.unlink(&root(), "a").await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.unlink(&root(), "d").await.unwrap_err(), FsError::EISDIR);
}

#[tokio::test]
async fn rmdir_cases() {
    let e = env().await;
    let c = &e.c;
    let d = nf("d");
    c.mkdir(&root(), &d).await.unwrap();
    c.create(&path("d"), &nf("f"), 0).await.unwrap();
    assert_eq!(c.rmdir(&root(), "d").await.unwrap_err(), FsError::ENOTEMPTY);
    assert_eq!(c.rmdir(&path("d"), "f").await.unwrap_err(), FsError::ENOTDIR);
    c.unlink(&path("d"), "f").await.unwrap();
    let r = c.rmdir(&root(), "d").await.unwrap();
    assert_eq!((r.fid, r.remaining), (d.fid, None));
    assert_eq!(c.rmdir(&root(), "d").await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.rmdir(&root(), ".imca").await.unwrap_err(), FsError::ENOENT);
}

#[tokio::test]
async fn rename_cases() {
    let e = env().await;
    let c = &e.c;
    let (a, b) = (nf("a"), nf("b"));
    c.create(&root(), &a, 0).await.unwrap();
    c.create(&root(), &b, 0).await.unwrap();
    c.write(&at("a", a.fid), 0, Bytes::from_static(b"A")).await.unwrap();
    c.mkdir(&root(), &nf("d")).await.unwrap();
    c.mkdir(&root(), &nf("e")).await.unwrap();
    let none = RenameFlags::default();
    // Across directories.
    let r = c.rename(&root(), "a", &path("d"), "a2", none).await.unwrap();
    assert_eq!((r.moved, r.replaced), (a.fid, None));
    // The old path is stale but the id still works.
    assert_eq!(&c.read(&at("a", a.fid), 0, 10).await.unwrap()[..], b"A");
    // NOREPLACE over an existing name.
    let nr = RenameFlags { noreplace: true, exchange: false };
    assert_eq!(c.rename(&path("d"), "a2", &root(), "b", nr).await.unwrap_err(), FsError::EEXIST);
    // EXCHANGE.
    let ex = RenameFlags { noreplace: false, exchange: true };
    let r = c.rename(&path("d"), "a2", &root(), "b", ex).await.unwrap();
    assert_eq!((r.moved, r.replaced), (a.fid, None));
    assert_eq!(c.lookup(&root(), "b").await.unwrap().fid, a.fid);
    assert_eq!(c.lookup(&path("d"), "a2").await.unwrap().fid, b.fid);
    // Over an existing file: the victim is reported and its id is gone.
    let r = c.rename(&path("d"), "a2", &root(), "b", none).await.unwrap();
    assert_eq!(r.moved, b.fid);
    let victim = r.replaced.unwrap();
    assert_eq!((victim.fid, victim.remaining), (a.fid, None));
    assert_eq!(c.getattr(&at("b", a.fid)).await.unwrap().nlink, 0, "still open (cached), no name left");
    c.release(&at("b", a.fid)).await.unwrap();
    common::gone_by_id(c, &at("b", a.fid)).await;
    // Directory cases.
    c.create(&path("e"), &nf("x"), 0).await.unwrap();
    assert_eq!(c.rename(&root(), "d", &root(), "e", none).await.unwrap_err(), FsError::ENOTEMPTY);
    assert_eq!(c.rename(&root(), "d", &root(), "b", none).await.unwrap_err(), FsError::ENOTDIR);
    assert_eq!(c.rename(&root(), "b", &root(), "d", none).await.unwrap_err(), FsError::EISDIR);
    assert_eq!(c.rename(&root(), "d", &path("d"), "sub", none).await.unwrap_err(), FsError::EINVAL);
    let r = c.rename(&root(), "d", &path("e"), "d", none).await.unwrap();
    assert!(r.replaced.is_none());
    assert_eq!(c.rename(&root(), "missing", &root(), "z", none).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.rename(&root(), "b", &root(), ".imca", none).await.unwrap_err(), FsError::EPERM);
}

#[tokio::test]
async fn read_write_open_fsync() {
    let e = env().await;
    let c = &e.c;
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    let l = at("f", f.fid);
    // Past 4 GiB, sparse.
    let off = 5u64 << 30;
    let w = c.write(&l, off, Bytes::from_static(b"far")).await.unwrap();
    assert_eq!(w.written, 3);
    assert_eq!(w.attr.unwrap().size, off + 3);
    assert_eq!(&c.read(&l, off - 2, 10).await.unwrap()[..], b"\0\0far");
    assert!(c.read(&l, off + 100, 10).await.unwrap().is_empty(), "past EOF reads nothing");
    // 1 MiB round trip.
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 % 256) as u8).collect();
    c.write(&l, 4096, Bytes::from(big.clone())).await.unwrap();
    assert_eq!(c.read(&l, 4096, 1 << 20).await.unwrap(), Bytes::from(big));
    c.open(&l, libc::O_RDONLY).await.unwrap();
    c.flush(&l).await.unwrap();
    c.fsync(&l, false).await.unwrap();
    c.fsync(&l, true).await.unwrap();
    c.fsync(&root(), false).await.unwrap();
    c.release(&l).await.unwrap();
    c.open(&l, libc::O_WRONLY | libc::O_TRUNC).await.unwrap();
    assert_eq!(c.getattr(&l).await.unwrap().size, 0);
    c.mkdir(&root(), &nf("d")).await.unwrap();
    assert_eq!(c.open(&path("d"), libc::O_WRONLY).await.unwrap_err(), FsError::EISDIR);
    c.open(&path("d"), libc::O_RDONLY).await.unwrap();
    assert_eq!(c.read(&path("d"), 0, 10).await.unwrap_err(), FsError::EISDIR);
    assert_eq!(c.write(&path("d"), 0, Bytes::from_static(b"x")).await.unwrap_err(), FsError::EISDIR);
    assert_eq!(c.open(&path("missing"), 0).await.unwrap_err(), FsError::ENOENT);
}

#[tokio::test]
async fn readdir_cookies_plus_and_hidden_meta() {
    let e = env().await;
    let c = &e.c;
    c.mkdir(&root(), &nf("d")).await.unwrap();
    let n = 2000;
    for i in 0..n {
        std::fs::write(e.export.join(format!("d/file-{i:05}")), b"x").unwrap();
    }
    let mut names = Vec::new();
    let mut cookie = 0;
    loop {
        let batch = c.readdir(&path("d"), cookie, 137, false).await.unwrap();
        if batch.is_empty() {
            break;
        }
        assert!(batch.len() <= 137);
        cookie = batch.last().unwrap().next;
        for ent in batch {
            assert_eq!(ent.kind, FileKind::File);
            assert!(ent.attr.is_none());
            names.push(ent.name);
        }
    }
    names.sort();
    let want: Vec<String> = (0..n).map(|i| format!("file-{i:05}")).collect();
    assert_eq!(names, want);
    // Files created behind IMCa's back got ids, and keep them.
    let first = c.readdir(&path("d"), 0, 5, true).await.unwrap();
    for ent in &first {
        assert_eq!(ent.attr.as_ref().unwrap().fid, ent.fid);
        assert_eq!(ent.attr.as_ref().unwrap().nlink, 1);
        assert_eq!(c.lookup(&path("d"), &ent.name).await.unwrap().fid, ent.fid);
    }
    // The root listing never shows .imca.
    let top = c.readdir(&root(), 0, 100, true).await.unwrap();
    assert_eq!(top.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), vec!["d"]);
    assert_eq!(c.readdir(&path("d/file-00001"), 0, 10, false).await.unwrap_err(), FsError::ENOTDIR);
    assert_eq!(c.readdir(&path(".imca"), 0, 10, false).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(c.mkdir(&root(), &nf(".imca")).await.unwrap_err(), FsError::EPERM);
    assert_eq!(c.getattr(&path(".imca/volume.json")).await.unwrap_err(), FsError::ENOENT);
}

#[tokio::test]
async fn statfs_and_xattrs() {
    let e = env().await;
    let c = &e.c;
    let s = c.statfs(&root()).await.unwrap();
    assert!(s.blocks > 0 && s.bsize > 0 && s.namelen >= 255);
    let f = nf("f");
    c.create(&root(), &f, 0).await.unwrap();
    let l = at("f", f.fid);
    let none = XattrFlags::default();
    c.setxattr(&l, "user.color", b"blue", none).await.unwrap();
    assert_eq!(&c.getxattr(&l, "user.color").await.unwrap()[..], b"blue");
    let create = XattrFlags { create: true, replace: false };
    let replace = XattrFlags { create: false, replace: true };
    assert_eq!(c.setxattr(&l, "user.color", b"red", create).await.unwrap_err(), FsError::EEXIST);
    assert_eq!(c.setxattr(&l, "user.size", b"1", replace).await.unwrap_err(), FsError::ENODATA);
    c.setxattr(&l, "user.color", b"red", replace).await.unwrap();
    let big = vec![b'v'; 4000];
    c.setxattr(&l, "user.big", &big, none).await.unwrap();
    assert_eq!(&c.getxattr(&l, "user.big").await.unwrap()[..], &big[..]);
    let mut names = c.listxattr(&l).await.unwrap();
    names.sort();
    assert_eq!(names, vec!["user.big", "user.color"], "user.imca.* is hidden");
    c.removexattr(&l, "user.color").await.unwrap();
    assert_eq!(c.getxattr(&l, "user.color").await.unwrap_err(), FsError::ENODATA);
    assert_eq!(c.removexattr(&l, "user.color").await.unwrap_err(), FsError::ENODATA);
    assert_eq!(c.getxattr(&l, "user.imca.fid").await.unwrap_err(), FsError::ENODATA);
    assert_eq!(c.setxattr(&l, "user.imca.fid", b"0", none).await.unwrap_err(), FsError::EPERM);
    assert_eq!(c.removexattr(&l, "user.imca.fid").await.unwrap_err(), FsError::EPERM);
    // Namespaces beyond user.* (issue 11): trusted.*/security.* where the
    // export allows them, never IMCa's own, never ACLs.
    assert_eq!(c.setxattr(&l, "system.posix_acl_access", b"0", none).await.unwrap_err(), FsError::ENOTSUP);
    assert_eq!(c.setxattr(&l, "trusted.imca.fid", b"0", none).await.unwrap_err(), FsError::EPERM);
    // Directories have xattrs too; the root's id stays hidden.
    c.setxattr(&root(), "user.r", b"1", none).await.unwrap();
    assert_eq!(c.listxattr(&root()).await.unwrap(), vec!["user.r"]);
    assert_eq!(xattr_of(&e.export.join("f"), "user.imca.fid"), f.fid.to_hex(), "the id survived");
}

fn xattr_of(p: &std::path::Path, name: &str) -> String {
    let out = std::process::Command::new("getfattr")
        .args(["--only-values", "-h", "-n", name])
        .arg(p)
        .output()
        .expect("getfattr (Debian package attr) must be installed");
    String::from_utf8(out.stdout).unwrap()
}
