//! What CMCache answers from the bank: once warm, getattr, lookup and read
//! do not reach the storage server at all.

use crate::support::{counts, pattern, reached, Spec, Stack};
use testkit::eventually;
use xlator::*;

const BS: u64 = 4096;

#[tokio::test]
async fn repeated_getattr_is_answered_by_the_bank() {
    let s = Stack::start(Spec::default()).await;
    let f = s.file("f", b"some bytes").await;
    let before = counts(&s);
    let a = s.gw().getattr(&f).await.unwrap();
    assert_eq!(reached(&s, before), (0, 1, 0), "the first getattr is a miss");
    for _ in 0..10 {
        assert_eq!(s.gw().getattr(&f).await.unwrap(), a);
    }
    assert_eq!(reached(&s, before), (0, 1, 0), "the next ten are hits");
    assert_eq!(a, s.disk().getattr(&f).await.unwrap());
}

#[tokio::test]
async fn repeated_lookup_is_answered_by_the_bank() {
    let s = Stack::start(Spec::default()).await;
    // behind the bank's back (a create through a gateway would fill it)
    s.on_disk("f", b"x").await;
    let before = counts(&s);
    let a = s.gw().lookup(&Loc::root(), "f").await.unwrap();
    assert_eq!(reached(&s, before), (0, 0, 1), "a cold lookup asks the server and stores the entry");
    // the entry is cached now; the child's stat comes with the next lookup
    assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap(), a);
    let warm = counts(&s);
    for _ in 0..10 {
        assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap(), a);
    }
    assert_eq!(reached(&s, warm), (0, 0, 0), "warm lookups (entry and stat in one round trip) are hits");
    assert_eq!(s.calls(Fop::Lookup), before.2 + 1, "the storage server saw one lookup in all");
    // a missing name is not cached as missing: each lookup asks
    for _ in 0..3 {
        assert_eq!(s.gw().lookup(&Loc::root(), "nothing").await.unwrap_err(), FsError::ENOENT);
    }
    assert_eq!(s.calls(Fop::Lookup), before.2 + 4);
}

#[tokio::test]
async fn repeated_reads_are_answered_by_the_bank() {
    let s = Stack::start(Spec::default()).await;
    let data = pattern(5 * BS as usize + 1000, 1);
    // written through the stack: SMCache stores every covering block
    let f = s.file("f", &data).await;
    let size = data.len() as u64;
    let before = counts(&s);
    for (off, len) in [(0, size), (100, 3 * BS), (BS, BS), (size - 10, 10), (4 * BS + 7, 2000)] {
        let got = s.gw().read(&f, off, len as u32).await.unwrap();
        assert_eq!(got, data.slice(off as usize..(off + len) as usize), "[{off}, +{len})");
    }
    assert_eq!(reached(&s, before).0, 0, "no read reached the storage server");

    // past the end: the blocks there were never written; the first read
    // populates them (empty), the next is a hit
    let tail = s.gw().read(&f, size - 10, 3 * BS as u32).await.unwrap();
    assert_eq!(tail, data.slice(data.len() - 10..), "short at EOF");
    let v = s.view();
    eventually("the empty blocks past EOF", || v.block(f.fid.unwrap(), 8).is_some()).await;
    let warm = counts(&s);
    assert_eq!(s.gw().read(&f, size - 10, 3 * BS as u32).await.unwrap(), tail);
    assert!(s.gw().read(&f, size + 2 * BS, 100).await.unwrap().is_empty());
    assert_eq!(reached(&s, warm).0, 0);
}

#[tokio::test]
async fn a_file_the_bank_never_saw_is_populated_by_its_first_read() {
    let s = Stack::start(Spec::default()).await;
    let data = pattern(3 * BS as usize, 2);
    let f = s.on_disk("f", &data).await;
    let before = counts(&s);
    assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
    assert_eq!(reached(&s, before).0, 1, "a miss is forwarded");
    let v = s.view();
    eventually("the storage server's populate", || (0..3).all(|n| v.block(f.fid.unwrap(), n).is_some())).await;
    for _ in 0..5 {
        assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
    }
    assert_eq!(reached(&s, before).0, 1, "then the bank answers");
}

#[tokio::test]
async fn what_cmcache_does_not_cache_always_reaches_the_server() {
    let s = Stack::start(Spec::default()).await;
    let f = s.file("f", b"x").await;
    s.gw().setxattr(&f, "user.a", b"1", XattrFlags::default()).await.unwrap();
    s.gw().symlink(&Loc::root(), &testkit::new_file("s"), "f").await.unwrap();
    for _ in 0..3 {
        // (with attributes, a listing is the bank's: see `listing`)
        s.gw().readdir(&Loc::root(), 0, 100, false).await.unwrap();
        s.gw().getxattr(&f, "user.a").await.unwrap();
        s.gw().listxattr(&f).await.unwrap();
        s.gw().readlink(&Loc::new("s", None)).await.unwrap();
        s.gw().statfs(&Loc::root()).await.unwrap();
    }
    for op in [Fop::Readdir, Fop::Getxattr, Fop::Listxattr, Fop::Readlink, Fop::Statfs] {
        assert_eq!(s.calls(op), 3, "{}", op.name());
    }
}

/// A create fills the new entry and stat from its own reply: another
/// gateway's first lookup and stat are hits, for every kind of create.
#[tokio::test]
async fn what_a_create_makes_is_in_the_bank_at_once() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    let (a, b) = (&s.gateways[0], &s.gateways[1]);
    let root = Loc::root();
    let f = testkit::new_file("f");
    let fa = a.create(&root, &f, libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    let d = testkit::new_file("d");
    let da = a.mkdir(&root, &d).await.unwrap().attr;
    let l = testkit::new_file("l");
    let la = a.symlink(&root, &l, "f").await.unwrap().attr;
    let n = testkit::new_file("n");
    let na = a.mknod(&root, &n, libc::S_IFREG | 0o644, 0).await.unwrap().attr;
    s.populated(0, 8).await;
    let before = counts(&s);
    for (name, want) in [("f", &fa), ("d", &da), ("l", &la), ("n", &na)] {
        assert_eq!(&b.lookup(&root, name).await.unwrap(), want, "{name}");
        assert_eq!(&b.getattr(&testkit::at(name, want.fid)).await.unwrap(), want, "{name}");
    }
    assert_eq!(reached(&s, before), (0, 0, 0), "nothing created through a gateway reached the disk again");
    // and what the bank holds is what the disk says
    for (name, want) in [("f", &fa), ("d", &da), ("l", &la), ("n", &na)] {
        assert_eq!(&s.disk().lookup(&root, name).await.unwrap(), want, "{name} on disk");
    }

    // a link: the new entry is filled; the file's stat changed (nlink) and is asked again
    let linked = a.link(&testkit::at("f", fa.fid), &root, "f2").await.unwrap().attr;
    assert_eq!(linked.nlink, 2);
    s.populated(0, 9).await;
    let before = counts(&s);
    assert_eq!(b.lookup(&root, "f2").await.unwrap(), linked);
    assert_eq!(reached(&s, before), (0, 1, 0), "the entry was a hit, the changed stat a miss");
    assert_eq!(b.getattr(&testkit::at("f", fa.fid)).await.unwrap().nlink, 2);
}

/// A mutation right after a create is never hidden by the create's
/// populate: the values it stored go when the file changes.
#[tokio::test]
async fn a_change_after_a_create_is_seen() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    let (a, b) = (&s.gateways[0], &s.gateways[1]);
    let root = Loc::root();
    for i in 0..20 {
        let name = format!("f{i}");
        let f = testkit::new_file(&name);
        let made = a.create(&root, &f, libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
        let loc = testkit::at(&name, made.fid);
        b.write(&loc, 0, bytes::Bytes::from_static(b"grown")).await.unwrap();
        assert_eq!(a.getattr(&loc).await.unwrap().size, 5, "{name}");
        b.unlink(&root, &name).await.unwrap();
        assert_eq!(a.lookup(&root, &name).await.unwrap_err(), FsError::ENOENT, "{name}");
    }
}

#[tokio::test]
async fn a_directory_changed_here_is_asked_of_the_server_not_the_bank() {
    let s = Stack::start(Spec::default()).await;
    let (d, e) = (testkit::new_file("d"), testkit::new_file("e"));
    s.gw().mkdir(&Loc::root(), &d).await.unwrap();
    s.gw().mkdir(&Loc::root(), &e).await.unwrap();
    let (dloc, eloc) = (testkit::at("d", d.fid), testkit::at("e", e.fid));
    s.gw().create(&dloc, &testkit::new_file("f"), libc::O_RDWR | libc::O_CREAT).await.unwrap();

    // e was made here but nothing changed in it: its stat is the bank's
    let before = counts(&s);
    let ea = s.gw().getattr(&eloc).await.unwrap();
    assert_eq!(s.gw().getattr(&eloc).await.unwrap(), ea);
    assert!(reached(&s, before).1 <= 1, "at most the first getattr of e reaches the server");

    // d had a create since it was last asked for: the server is asked
    // (no claim, nothing stored for the next change to delete), after each
    // change again
    for i in 0..3 {
        let before = counts(&s);
        assert_eq!(s.gw().getattr(&dloc).await.unwrap(), s.disk().getattr(&dloc).await.unwrap());
        assert_eq!(reached(&s, before).1, 1 + 1, "one through the gateway, one asked directly here");
        assert!(s.view().stat(d.fid).is_none(), "no stat of d was populated");
        s.gw().create(&dloc, &testkit::new_file(&format!("g{i}")), libc::O_RDWR | libc::O_CREAT).await.unwrap();
    }
    // d stops changing: the first getattr asks, the second populates, then hits
    let first = s.gw().getattr(&dloc).await.unwrap();
    assert_eq!(s.gw().getattr(&dloc).await.unwrap(), first);
    let v = s.view();
    eventually("d's stat in the bank", || v.stat(d.fid).is_some()).await;
    let before = counts(&s);
    assert_eq!(s.gw().getattr(&dloc).await.unwrap(), first);
    assert_eq!(reached(&s, before).1, 0, "a directory that stopped changing is the bank's again");
}
