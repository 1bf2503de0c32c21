//! One id, one object: a create naming an id this server already holds is
//! refused (EEXIST) and makes nothing, whatever kind either object is; the
//! cases stripe relies on (the same id on another server, a create retried
//! after a rollback, a non-exclusive create of an existing name) still work.
//! A link never carries an id, so it cannot alias one.

mod support;
use bytes::Bytes;
use support::*;
use xlator::*;

/// Every way to make a new object, with `new` as its arguments.
async fn make_each(x: &dyn Translator, new: &NewFile) -> Vec<(&'static str, FsResult<Attr>)> {
    let n = |s: &str| NewFile { name: format!("{}-{s}", new.name), ..new.clone() };
    vec![
        ("create", x.create(&root(), &n("create"), libc::O_RDWR).await.map(|m| m.attr)),
        ("create non-exclusive", x.create(&root(), &NewFile { exclusive: false, ..n("open") }, libc::O_RDWR).await.map(|m| m.attr)),
        ("mkdir", x.mkdir(&root(), &n("mkdir")).await.map(|m| m.attr)),
        ("mknod file", x.mknod(&root(), &n("mknod"), libc::S_IFREG | 0o644, 0).await.map(|m| m.attr)),
        ("mknod fifo", x.mknod(&root(), &n("fifo"), libc::S_IFIFO | 0o644, 0).await.map(|m| m.attr)),
        ("symlink", x.symlink(&root(), &n("symlink"), "target").await.map(|m| m.attr)),
    ]
}

#[tokio::test]
async fn a_create_naming_an_id_in_use_is_refused_and_makes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let x: &dyn Translator = &*p;
    // The victims: a root-owned 0600 file with content, a directory, a
    // symlink, and a file whose last name is gone but which is still open.
    let secret = NewFile { perm: 0o600, ..nf("secret") };
    x.create(&root(), &secret, libc::O_RDWR).await.unwrap();
    x.write(&at("secret", secret.fid), 0, Bytes::from_static(b"root only")).await.unwrap();
    let d = nf("d");
    x.mkdir(&root(), &d).await.unwrap();
    let s = nf("s");
    x.symlink(&root(), &s, "secret").await.unwrap();
    let gone = nf("gone");
    x.create(&root(), &gone, libc::O_RDWR).await.unwrap();
    x.write(&at("gone", gone.fid), 0, Bytes::from_static(b"still open")).await.unwrap();
    x.unlink(&root(), "gone").await.unwrap();

    for victim in [secret.fid, d.fid, s.fid, gone.fid] {
        for (op, r) in make_each(x, &with_fid(&nf("evil"), victim)).await {
            assert_eq!(r.unwrap_err(), FsError::EEXIST, "{op} with the id of {victim}");
        }
    }
    // Ids no gateway draws: the root's, zero, the ones posix derives from inodes.
    for bad in [FileId::ROOT, FileId(0), FileId(1 << 126 | 42)] {
        for (op, r) in make_each(x, &with_fid(&nf("odd"), bad)).await {
            assert_eq!(r.unwrap_err(), FsError::EINVAL, "{op} with {bad}");
        }
    }
    let names: Vec<String> = x.readdir(&root(), 0, 100, false).await.unwrap().into_iter().map(|e| e.name).collect();
    assert!(names.iter().all(|n| !n.starts_with("evil") && !n.starts_with("odd")), "nothing was made: {names:?}");

    // Every id still reaches its own object.
    assert_eq!(&x.read(&at("secret", secret.fid), 0, 100).await.unwrap()[..], b"root only");
    assert_eq!(&x.read(&at("evil-create", secret.fid), 0, 100).await.unwrap()[..], b"root only");
    assert_eq!(x.getattr(&at("d", d.fid)).await.unwrap().kind, FileKind::Dir);
    assert_eq!(x.readlink(&at("s", s.fid)).await.unwrap(), "secret");
    assert_eq!(&x.read(&at("gone", gone.fid), 0, 100).await.unwrap()[..], b"still open");
    let h = secret.fid.to_hex();
    let link = dir.path().join(".imca/fids").join(&h[30..]).join(&h);
    assert_eq!(std::fs::read(link).unwrap(), b"root only", "the per-fid link was not re-pointed");

    // A link names the same object again, so it cannot alias an id either:
    // a location naming one id with another's path links the one with the
    // id; a file with no name left cannot be linked back.
    let l = x.link(&at("d-not-this", secret.fid), &root(), "l").await.unwrap().attr;
    assert_eq!((l.fid, x.lookup(&root(), "l").await.unwrap().fid), (secret.fid, secret.fid));
    assert_eq!(x.link(&at("gone", gone.fid), &root(), "back").await.unwrap_err(), FsError::ENOENT);

    // Once the unlinked file is released, its id is free again.
    x.release(&at("gone", gone.fid)).await.unwrap();
    x.create(&root(), &with_fid(&nf("reborn"), gone.fid), libc::O_RDWR).await.unwrap();
    assert!(x.read(&at("reborn", gone.fid), 0, 100).await.unwrap().is_empty());
}

async fn make(x: &dyn Translator, kind: &str, new: &NewFile) -> FsResult<Attr> {
    match kind {
        "create" => x.create(&root(), new, libc::O_RDWR).await.map(|m| m.attr),
        "mkdir" => x.mkdir(&root(), new).await.map(|m| m.attr),
        "symlink" => x.symlink(&root(), new, "t").await.map(|m| m.attr),
        _ => x.mknod(&root(), new, libc::S_IFIFO | 0o600, 0).await.map(|m| m.attr),
    }
}

/// What stripe does: server 0 decides the id, the others create with it;
/// a partial create is rolled back and retried; a non-exclusive create of a
/// name that exists opens it whatever id it carries.
#[tokio::test]
async fn the_same_id_on_another_server_after_a_rollback_and_for_an_existing_name() {
    let (d0, d1) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (s0, s1) = (posix::posix(d0.path(), 64).unwrap(), posix::posix(d1.path(), 64).unwrap());
    let (x0, x1): (&dyn Translator, &dyn Translator) = (&*s0, &*s1);
    for kind in ["create", "mkdir", "symlink", "fifo"] {
        let new = nf(kind);
        let a0 = make(x0, kind, &new).await.unwrap();
        assert_eq!(make(x1, kind, &new).await.unwrap().fid, a0.fid, "{kind}: server 1 takes server 0's id");
        // Rolled back on server 1 (as stripe does when another server fails), then retried.
        if kind == "mkdir" {
            x1.rmdir(&root(), kind).await.unwrap();
        } else {
            x1.unlink(&root(), kind).await.unwrap();
        }
        x1.release(&at(kind, new.fid)).await.unwrap();
        assert_eq!(make(x1, kind, &new).await.unwrap().fid, a0.fid, "{kind}: the id is free again after the rollback");
        // The same create once more on a server that has it: the name is taken.
        assert_eq!(make(x1, kind, &new).await.unwrap_err(), FsError::EEXIST, "{kind}");
    }
    // Non-exclusive create of an existing file with its own id (a racing
    // gateway on servers 1..S-1): opened, not refused.
    let f = NewFile { exclusive: false, ..nf("shared") };
    let a = x1.create(&root(), &f, libc::O_RDWR).await.unwrap().attr;
    x1.write(&at("shared", f.fid), 0, Bytes::from_static(b"kept")).await.unwrap();
    let again = x1.create(&root(), &f, libc::O_RDWR).await.unwrap().attr;
    assert_eq!((again.fid, again.size), (a.fid, 4));
    // ... but the id of an existing file does not make a second name.
    let elsewhere = NewFile { name: "elsewhere".into(), ..f.clone() };
    assert_eq!(x1.create(&root(), &elsewhere, libc::O_RDWR).await.unwrap_err(), FsError::EEXIST);
    assert_eq!(x1.lookup(&root(), "elsewhere").await.unwrap_err(), FsError::ENOENT);
    // Directories replaced by a rename give their id back too.
    let (e, g) = (nf("e"), nf("g"));
    x1.mkdir(&root(), &e).await.unwrap();
    x1.mkdir(&root(), &g).await.unwrap();
    x1.rename(&root(), "e", &root(), "g", RenameFlags::default()).await.unwrap();
    x1.mkdir(&root(), &with_fid(&nf("g2"), g.fid)).await.unwrap();
    assert_eq!(x1.mkdir(&root(), &with_fid(&nf("e2"), e.fid)).await.unwrap_err(), FsError::EEXIST);
}

/// Many creates racing with one id: exactly one object gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_creates_with_one_id_make_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    for round in 0..20 {
        let id = fid();
        let mut tasks = Vec::new();
        for i in 0..8 {
            let p = p.clone();
            let new = with_fid(&nf(&format!("r{round}-{i}")), id);
            tasks.push(tokio::spawn(async move {
                match i % 3 {
                    0 => p.mkdir(&root(), &new).await,
                    1 => p.create(&root(), &new, libc::O_RDWR).await,
                    _ => p.symlink(&root(), &new, "t").await,
                }
            }));
        }
        let mut made = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(a) => {
                    assert_eq!(a.attr.fid, id);
                    made += 1;
                }
                Err(e) => assert_eq!(e, FsError::EEXIST),
            }
        }
        assert_eq!(made, 1, "round {round}");
        let here = p.readdir(&root(), 0, 1000, false).await.unwrap();
        assert_eq!(here.iter().filter(|e| e.name.starts_with(&format!("r{round}-"))).count(), 1, "round {round}: the losers left nothing");
    }
}
