//! Namespace mutations drop what they change: the parent's stat, the
//! entry, the child's stat (a new or a removed name changes the parent's
//! mtime and nlink, and the child's ctime and nlink). SMCache never stores
//! stat or entries itself — only gateways see the merged answers.

use crate::support::{fid, Stack};
use testkit::{at, new_file, View};
use xlator::*;

const BS: u32 = 4096;

/// Plant the keys a gateway would have cached for `parent/name`.
async fn cached(v: &View, s: &Stack, parent: &Loc, name: &str, child: Option<&Attr>) {
    v.put_stat(&s.sm.getattr(parent).await.unwrap()).await;
    let kind = child.map_or(FileKind::File, |a| a.kind);
    v.put_dentry(fid(parent), name, child.map_or(FileId(7), |a| a.fid), kind).await;
    if let Some(a) = child {
        v.put_stat(a).await;
    }
}

fn assert_dropped(v: &View, parent: &Loc, name: &str, child: Option<FileId>, what: &str) {
    assert!(!v.has_stat_key(fid(parent)), "{what}: the parent's stat stayed");
    assert!(v.dentry(fid(parent), name).is_none(), "{what}: the entry stayed");
    if let Some(c) = child {
        assert!(!v.has_stat_key(c), "{what}: the child's stat stayed");
    }
}

/// A new name drops the parent's stat and leaves the new name's entry and
/// the new object's stat alone: only the creating gateway's claims can be
/// there (no negative entries are cached, and the name's last removal
/// deleted its entry), and it fills them from the create's reply.
fn assert_parent_only(v: &View, parent: &Loc, name: &str, what: &str) {
    assert!(!v.has_stat_key(fid(parent)), "{what}: the parent's stat stayed");
    assert!(v.dentry(fid(parent), name).is_some(), "{what}: the claimed entry was deleted");
}

#[tokio::test]
async fn creates_drop_the_parent_stat_only() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let d = new_file("d");
    s.sm.mkdir(&Loc::root(), &d).await.unwrap();
    let dir = at("d", d.fid);

    // the parent's stat, and the entry a creating gateway claimed
    cached(&v, &s, &dir, "f", None).await;
    s.sm.create(&dir, &new_file("f"), libc::O_RDWR | libc::O_CREAT).await.unwrap();
    assert_parent_only(&v, &dir, "f", "create");

    cached(&v, &s, &dir, "sub", None).await;
    s.sm.mkdir(&dir, &new_file("sub")).await.unwrap();
    assert_parent_only(&v, &dir, "sub", "mkdir");

    cached(&v, &s, &dir, "fifo", None).await;
    s.sm.mknod(&dir, &new_file("fifo"), libc::S_IFIFO | 0o644, 0).await.unwrap();
    assert_parent_only(&v, &dir, "fifo", "mknod");

    cached(&v, &s, &dir, "sym", None).await;
    s.sm.symlink(&dir, &new_file("sym"), "f").await.unwrap();
    assert_parent_only(&v, &dir, "sym", "symlink");

    let f = s.sm.lookup(&dir, "f").await.unwrap();
    cached(&v, &s, &dir, "hard", None).await;
    v.put_stat(&f).await;
    s.sm.link(&at("d/f", f.fid), &dir, "hard").await.unwrap();
    assert_parent_only(&v, &dir, "hard", "link");
    assert!(!v.has_stat_key(f.fid), "link: the file's stat (nlink) stayed");

    // O_TRUNC on an existing file changes it: its entry and stat go
    s.sm.write(&at("d/f", f.fid), 0, bytes::Bytes::from_static(b"data")).await.unwrap();
    let f = s.sm.getattr(&at("d/f", f.fid)).await.unwrap();
    cached(&v, &s, &dir, "f", Some(&f)).await;
    s.sm.create(&dir, &new_file("f"), libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC).await.unwrap();
    assert_dropped(&v, &dir, "f", Some(f.fid), "create with O_TRUNC of an existing file");
}

#[tokio::test]
async fn removals_drop_the_parent_stat_the_entry_and_the_child_stat() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let d = new_file("d");
    s.sm.mkdir(&Loc::root(), &d).await.unwrap();
    let dir = at("d", d.fid);
    let f = s.sm.create(&dir, &new_file("f"), libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    s.sm.link(&at("d/f", f.fid), &dir, "g").await.unwrap();
    let sub = s.sm.mkdir(&dir, &new_file("sub")).await.unwrap().attr;

    let f = s.sm.getattr(&at("d/f", f.fid)).await.unwrap();
    cached(&v, &s, &dir, "f", Some(&f)).await;
    let r = s.sm.unlink(&dir, "f").await.unwrap();
    assert_eq!(r.remaining.map(|a| a.nlink), Some(1));
    assert_dropped(&v, &dir, "f", Some(f.fid), "unlink of one of two names");

    cached(&v, &s, &dir, "sub", Some(&sub)).await;
    s.sm.rmdir(&dir, "sub").await.unwrap();
    assert_dropped(&v, &dir, "sub", Some(sub.fid), "rmdir");

    // a failed removal changes nothing and drops nothing
    cached(&v, &s, &dir, "missing", None).await;
    assert_eq!(s.sm.unlink(&dir, "missing").await.unwrap_err(), FsError::ENOENT);
    assert!(v.dentry(fid(&dir), "missing").is_some());
}

#[tokio::test]
async fn rename_drops_both_entries_both_parents_and_both_files() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let (a, b) = (new_file("a"), new_file("b"));
    s.sm.mkdir(&Loc::root(), &a).await.unwrap();
    s.sm.mkdir(&Loc::root(), &b).await.unwrap();
    let (da, db) = (at("a", a.fid), at("b", b.fid));
    let x = s.sm.create(&da, &new_file("x"), libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    let y = s.sm.create(&db, &new_file("y"), libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;

    cached(&v, &s, &da, "x", Some(&x)).await;
    cached(&v, &s, &db, "y", Some(&y)).await;
    let r = s.sm.rename(&da, "x", &db, "y", RenameFlags::default()).await.unwrap();
    assert_eq!((r.moved, r.replaced.map(|r| r.fid)), (x.fid, Some(y.fid)));
    assert_dropped(&v, &da, "x", Some(x.fid), "rename (source side)");
    assert_dropped(&v, &db, "y", Some(y.fid), "rename (target side, replaced file)");

    // parents given by path only: SMCache finds their ids to name the keys
    cached(&v, &s, &db, "y", Some(&s.sm.getattr(&at("b/y", x.fid)).await.unwrap())).await;
    cached(&v, &s, &da, "z", None).await;
    s.sm.rename(&Loc::new("b", None), "y", &Loc::new("a", None), "z", RenameFlags::default()).await.unwrap();
    assert_dropped(&v, &db, "y", Some(x.fid), "rename by path (source side)");
    assert_dropped(&v, &da, "z", None, "rename by path (target side)");
}
