//! The semantics the differential test reaches only by chance, spelled out
//! once and checked on both leaves (memory and posix over a temporary
//! directory): each scenario asserts exact answers, so a leaf that drifts
//! fails here with a readable message rather than at op 417 of a seed.

use bytes::Bytes;
use std::sync::Arc;
use xlator::*;

/// Run `scenario` against memory and against posix.
async fn on_both<F, Fut>(scenario: F)
where
    F: Fn(Arc<dyn Translator>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    scenario(memory::memory()).await;
    let dir = tempfile::tempdir().unwrap();
    scenario(posix::posix(dir.path(), 64).unwrap()).await;
}

fn nf(name: &str, id: u128) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(id), perm: 0o644, owner: Owner::default(), exclusive: true }
}

fn at(path: &str, fid: FileId) -> Loc {
    Loc::new(path, Some(fid))
}

fn p(path: &str) -> Loc {
    Loc::new(path, None)
}

const NONE: RenameFlags = RenameFlags { noreplace: false, exchange: false };
const NOREPLACE: RenameFlags = RenameFlags { noreplace: true, exchange: false };
const EXCHANGE: RenameFlags = RenameFlags { noreplace: false, exchange: true };

#[tokio::test]
async fn an_unlinked_open_file_stays_reachable_by_id_until_released() {
    on_both(|x| async move {
        let f = nf("f", 1);
        x.create(&Loc::root(), &f, libc::O_RDWR).await.unwrap();
        let l = at("f", f.fid);
        x.write(&l, 0, Bytes::from_static(b"hello")).await.unwrap();
        let r = x.unlink(&Loc::root(), "f").await.unwrap();
        assert_eq!((r.fid, r.remaining), (f.fid, None));
        assert_eq!(x.lookup(&Loc::root(), "f").await.unwrap_err(), FsError::ENOENT);
        // by id: still there, no names
        assert_eq!(&x.read(&l, 0, 100).await.unwrap()[..], b"hello");
        assert_eq!(x.getattr(&l).await.unwrap().nlink, 0);
        let w = x.write(&l, 5, Bytes::from_static(b"!")).await.unwrap();
        assert_eq!(w.attr.unwrap().nlink, 1, "posix answers writes with nlink at least 1");
        assert_eq!(x.link(&l, &Loc::root(), "again").await.unwrap_err(), FsError::ENOENT);
        x.release(&l).await.unwrap();
        assert_eq!(x.getattr(&l).await.unwrap_err(), FsError::ENOENT);
        assert_eq!(x.read(&l, 0, 100).await.unwrap_err(), FsError::ENOENT);
    })
    .await;
}

#[tokio::test]
async fn ids_resolve_first_for_files_and_directories() {
    on_both(|x| async move {
        let (d, e, f) = (nf("d", 10), nf("e", 11), nf("f", 12));
        x.mkdir(&Loc::root(), &d).await.unwrap();
        x.mkdir(&Loc::root(), &e).await.unwrap();
        x.create(&at("d", d.fid), &f, libc::O_RDWR).await.unwrap();
        x.rename(&at("d", d.fid), "f", &at("e", e.fid), "g", NONE).await.unwrap();
        // a file: its id finds it wherever it went, whatever path is sent
        assert_eq!(x.getattr(&at("d/f", f.fid)).await.unwrap().fid, f.fid);
        assert_eq!(x.getattr(&at("nowhere", f.fid)).await.unwrap().fid, f.fid);
        // a directory too (posix: its marker's record), whatever path is sent
        x.rename(&Loc::root(), "d", &Loc::root(), "d2", NONE).await.unwrap();
        assert_eq!(x.getattr(&at("d", d.fid)).await.unwrap().fid, d.fid);
        assert_eq!(x.getattr(&at("d2", d.fid)).await.unwrap().fid, d.fid);
        assert_eq!(x.getattr(&at("e", d.fid)).await.unwrap().fid, d.fid);
        // an id that is gone: the path must hold it
        x.rmdir(&Loc::root(), "d2").await.unwrap();
        assert_eq!(x.getattr(&at("e", d.fid)).await.unwrap_err(), FsError::ENOENT);
        // on the way: a file is ENOTDIR, a symlink ELOOP; bad names are refused
        x.symlink(&Loc::root(), &nf("s", 13), "e").await.unwrap();
        assert_eq!(x.getattr(&p("e/g/x")).await.unwrap_err(), FsError::ENOTDIR);
        assert_eq!(x.getattr(&p("s/g")).await.unwrap_err(), FsError::ELOOP);
        assert_eq!(x.getattr(&p("e//g")).await.unwrap_err(), FsError::EINVAL);
        assert_eq!(x.lookup(&Loc::root(), &"n".repeat(256)).await.unwrap_err(), FsError::ENAMETOOLONG);
        assert_eq!(x.lookup(&Loc::root(), ".imca").await.unwrap_err(), FsError::ENOENT);
        assert_eq!(x.mkdir(&Loc::root(), &nf(".imca", 14)).await.unwrap_err(), FsError::EPERM);
    })
    .await;
}

#[tokio::test]
async fn rename_follows_the_kernel_rules() {
    on_both(|x| async move {
        let root = Loc::root();
        for (i, name) in ["a", "b", "full"].iter().enumerate() {
            x.mkdir(&root, &nf(name, 20 + i as u128)).await.unwrap();
        }
        x.mkdir(&p("a"), &nf("sub", 23)).await.unwrap();
        x.create(&p("full"), &nf("x", 24), libc::O_RDWR).await.unwrap();
        x.create(&root, &nf("f", 25), libc::O_RDWR).await.unwrap();
        x.create(&root, &nf("g", 26), libc::O_RDWR).await.unwrap();
        let e = |r: FsResult<Renamed>| r.unwrap_err();
        assert_eq!(e(x.rename(&root, "a", &p("a/sub"), "in", NONE).await), FsError::EINVAL, "beneath itself");
        assert_eq!(e(x.rename(&p("a/sub"), "..", &root, "z", NONE).await), FsError::EINVAL, "bad name");
        assert_eq!(e(x.rename(&p("a"), "sub", &root, "a", NONE).await), FsError::ENOTEMPTY, "over its ancestor");
        assert_eq!(e(x.rename(&p("a"), "sub", &root, "a", EXCHANGE).await), FsError::EINVAL);
        assert_eq!(e(x.rename(&root, "f", &root, "g", NOREPLACE).await), FsError::EEXIST);
        assert_eq!(e(x.rename(&root, "f", &root, "new", EXCHANGE).await), FsError::ENOENT);
        assert_eq!(
            e(x.rename(&root, "f", &root, "g", RenameFlags { noreplace: true, exchange: true }).await),
            FsError::EINVAL
        );
        assert_eq!(e(x.rename(&root, "f", &root, "b", NONE).await), FsError::EISDIR);
        assert_eq!(e(x.rename(&root, "b", &root, "f", NONE).await), FsError::ENOTDIR);
        assert_eq!(e(x.rename(&root, "b", &root, "full", NONE).await), FsError::ENOTEMPTY);
        // a directory over an empty one; a file over another file
        let r = x.rename(&root, "b", &p("a"), "sub", NONE).await.unwrap();
        assert_eq!((r.moved, r.replaced.map(|x| x.fid)), (FileId::from_random(21), Some(FileId::from_random(23))));
        let r = x.rename(&root, "f", &root, "g", NONE).await.unwrap();
        let replaced = r.replaced.unwrap();
        assert_eq!((replaced.fid, replaced.remaining), (FileId::from_random(26), None));
        // exchange a file and a directory; two names of one file
        x.rename(&root, "g", &root, "full", EXCHANGE).await.unwrap();
        assert_eq!(x.lookup(&root, "g").await.unwrap().kind, FileKind::Dir);
        x.link(&p("full"), &root, "h").await.unwrap();
        let r = x.rename(&root, "full", &root, "h", NONE).await.unwrap();
        assert_eq!(r.replaced, None);
        assert_eq!(x.lookup(&root, "full").await.unwrap().nlink, 2, "both names stay");
        // a directory's nlink is 2 + its subdirectories
        assert_eq!(x.getattr(&p("a")).await.unwrap().nlink, 3);
        assert_eq!(x.getattr(&root).await.unwrap().nlink, 4);
    })
    .await;
}

#[tokio::test]
async fn hard_links_share_data_and_count_names() {
    on_both(|x| async move {
        let root = Loc::root();
        let f = nf("f", 30);
        x.create(&root, &f, libc::O_RDWR).await.unwrap();
        assert_eq!(x.link(&p("f"), &root, "g").await.unwrap().attr.nlink, 2);
        assert_eq!(x.link(&p("f"), &root, "g").await.unwrap_err(), FsError::EEXIST);
        x.write(&p("g"), 0, Bytes::from_static(b"shared")).await.unwrap();
        assert_eq!(&x.read(&p("f"), 0, 10).await.unwrap()[..], b"shared");
        let r = x.unlink(&root, "f").await.unwrap();
        assert_eq!(r.remaining.map(|a| (a.fid, a.nlink)), Some((f.fid, 1)));
        x.mkdir(&root, &nf("d", 31)).await.unwrap();
        assert_eq!(x.link(&p("d"), &root, "d2").await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.unlink(&root, "d").await.unwrap_err(), FsError::EISDIR);
        assert_eq!(x.rmdir(&root, "g").await.unwrap_err(), FsError::ENOTDIR);
    })
    .await;
}

#[tokio::test]
async fn reads_are_short_only_at_end_of_file() {
    on_both(|x| async move {
        let f = nf("f", 40);
        x.create(&Loc::root(), &f, libc::O_RDWR).await.unwrap();
        let l = at("f", f.fid);
        x.write(&l, 10_000, Bytes::from(vec![7u8; 5000])).await.unwrap();
        let d = x.read(&l, 0, 12_000).await.unwrap();
        assert_eq!(d.len(), 12_000);
        assert!(d[..10_000].iter().all(|&b| b == 0), "a hole reads as zeros");
        assert_eq!(x.read(&l, 14_000, 4096).await.unwrap().len(), 1000);
        assert!(x.read(&l, 20_000, 10).await.unwrap().is_empty());
        assert_eq!(x.read(&l, 0, memory::MAX_READ + 1).await.unwrap_err(), FsError::EINVAL);
        x.setattr(&l, &SetAttr { size: Some(3), ..Default::default() }).await.unwrap();
        assert_eq!(x.read(&l, 0, 100).await.unwrap().len(), 3);
        x.open(&l, libc::O_WRONLY | libc::O_TRUNC).await.unwrap();
        assert_eq!(x.getattr(&l).await.unwrap().size, 0);
    })
    .await;
}

#[tokio::test]
async fn a_resumed_listing_neither_repeats_nor_skips() {
    on_both(|x| async move {
        let root = Loc::root();
        let names: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        for (i, n) in names.iter().enumerate() {
            x.create(&root, &nf(n, 50 + i as u128), libc::O_RDWR).await.unwrap();
        }
        let first = x.readdir(&root, 0, 5, false).await.unwrap();
        assert_eq!(first.len(), 5);
        // remove one listed and one not yet listed name; add one
        let listed = &first[0].name;
        let later = names.iter().find(|n| !first.iter().any(|e| &e.name == *n)).unwrap();
        x.unlink(&root, listed).await.unwrap();
        x.unlink(&root, later).await.unwrap();
        x.create(&root, &nf("new", 99), libc::O_RDWR).await.unwrap();
        let mut seen: Vec<String> = first.iter().map(|e| e.name.clone()).collect();
        let mut cookie = first.last().unwrap().next;
        loop {
            let page = x.readdir(&root, cookie, 4, true).await.unwrap();
            let Some(last) = page.last() else { break };
            cookie = last.next;
            assert!(page.iter().all(|e| e.attr.as_ref().is_some_and(|a| a.fid == e.fid)));
            seen.extend(page.into_iter().map(|e| e.name));
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "no name twice: {seen:?}");
        for n in names.iter().filter(|n| *n != listed && *n != later) {
            assert!(seen.contains(n), "{n} was there all along and was not listed");
        }
        assert!(!seen.contains(later), "removed before it was reached");
    })
    .await;
}

#[tokio::test]
async fn xattrs_in_client_namespaces_user_on_files_and_directories_only() {
    on_both(|x| async move {
        let root = Loc::root();
        x.create(&root, &nf("f", 60), libc::O_RDWR).await.unwrap();
        x.symlink(&root, &nf("s", 61), "f").await.unwrap();
        let (f, s) = (p("f"), p("s"));
        let (create, replace) = (XattrFlags { create: true, replace: false }, XattrFlags { create: false, replace: true });
        let none = XattrFlags::default();
        x.setxattr(&f, "user.a", b"1", create).await.unwrap();
        assert_eq!(x.setxattr(&f, "user.a", b"2", create).await.unwrap_err(), FsError::EEXIST);
        assert_eq!(x.setxattr(&f, "user.b", b"2", replace).await.unwrap_err(), FsError::ENODATA);
        assert_eq!(x.setxattr(&f, "system.posix_acl_access", b"1", create).await.unwrap_err(), FsError::ENOTSUP);
        assert_eq!(x.setxattr(&f, "user.imca.fid", b"1", create).await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.setxattr(&s, "trusted.imca.fid", b"1", none).await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.removexattr(&s, "trusted.imca.fid").await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.getxattr(&s, "trusted.imca.fid").await.unwrap_err(), FsError::ENODATA);
        assert_eq!(x.setxattr(&f, "security.capability", b"1", none).await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.setxattr(&f, "", b"1", create).await.unwrap_err(), FsError::ERANGE);
        assert_eq!(x.setxattr(&s, "user.a", b"1", create).await.unwrap_err(), FsError::EPERM);
        assert_eq!(x.getxattr(&s, "user.a").await.unwrap_err(), FsError::ENODATA);
        assert_eq!(x.getxattr(&f, "user.imca.fid").await.unwrap_err(), FsError::ENODATA);
        assert_eq!(&x.getxattr(&f, "user.a").await.unwrap()[..], b"1");
        assert_eq!(x.listxattr(&f).await.unwrap(), vec!["user.a".to_string()]);
        assert_eq!(x.listxattr(&s).await.unwrap(), Vec::<String>::new(), "the symlink's own id is hidden");
        // trusted.* and security.* on any kind (the server runs as root)
        x.setxattr(&s, "trusted.t", b"on a symlink", none).await.unwrap();
        x.setxattr(&f, "security.s", b"label", none).await.unwrap();
        assert_eq!(&x.getxattr(&s, "trusted.t").await.unwrap()[..], b"on a symlink");
        assert_eq!(x.listxattr(&s).await.unwrap(), vec!["trusted.t".to_string()]);
        let mut names = x.listxattr(&f).await.unwrap();
        names.sort();
        assert_eq!(names, vec!["security.s".to_string(), "user.a".to_string()]);
        x.removexattr(&s, "trusted.t").await.unwrap();
        x.removexattr(&f, "security.s").await.unwrap();
        x.removexattr(&f, "user.a").await.unwrap();
        assert_eq!(x.removexattr(&f, "user.a").await.unwrap_err(), FsError::ENODATA);
        assert_eq!(x.setattr(&s, &SetAttr { perm: Some(0o600), ..Default::default() }).await.unwrap_err(), FsError::ENOTSUP);
    })
    .await;
}

/// The memory leaf counts what reached it, per operation.
#[tokio::test]
async fn calls_are_counted_per_operation() {
    let m = memory::memory();
    let x: &dyn Translator = &*m;
    x.create(&Loc::root(), &nf("f", 70), libc::O_RDWR).await.unwrap();
    for _ in 0..3 {
        x.getattr(&p("f")).await.unwrap();
    }
    let _ = x.lookup(&Loc::root(), "missing").await;
    assert_eq!(m.calls(Fop::Create), 1);
    assert_eq!(m.calls(Fop::Getattr), 3);
    assert_eq!(m.calls(Fop::Lookup), 1, "failed calls count too");
    assert_eq!(m.calls(Fop::Read), 0);
    assert_eq!(m.total_calls(), 5);
    assert_eq!(m.objects(), 2, "the root and f");
}

/// Fifos and sockets keep their kind; devices are refused as by posix's
/// default policy; open of a socket is ENXIO (Linux's answer).
#[tokio::test]
async fn special_files_keep_their_kind() {
    on_both(|x| async move {
        let root = Loc::root();
        let a = x.mknod(&root, &nf("fifo", 70), libc::S_IFIFO | 0o640, 0).await.unwrap().attr;
        assert_eq!((a.kind, a.rdev, a.perm), (FileKind::Fifo, 0, 0o644));
        let a = x.mknod(&root, &nf("sock", 71), libc::S_IFSOCK | 0o640, 0).await.unwrap().attr;
        assert_eq!(a.kind, FileKind::Socket);
        for (fmt, id) in [(libc::S_IFCHR, 72), (libc::S_IFBLK, 73)] {
            assert_eq!(x.mknod(&root, &nf("dev", id), fmt | 0o640, 0x103).await.unwrap_err(), FsError::EPERM);
        }
        assert_eq!(x.lookup(&root, "sock").await.unwrap().kind, FileKind::Socket);
        assert_eq!(x.open(&p("sock"), libc::O_RDWR).await.unwrap_err(), FsError(libc::ENXIO));
        x.open(&p("fifo"), libc::O_RDONLY).await.unwrap();
        let mut kinds = listed_kinds(&x).await;
        kinds.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(kinds, vec![("fifo".to_string(), FileKind::Fifo), ("sock".to_string(), FileKind::Socket)]);
    })
    .await;
}

async fn listed_kinds(x: &Arc<dyn Translator>) -> Vec<(String, FileKind)> {
    x.readdir(&Loc::root(), 0, 100, false).await.unwrap().into_iter().map(|e| (e.name, e.kind)).collect()
}
