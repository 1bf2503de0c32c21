//! A namespace change's answer carries its directory's attributes just
//! after it (NFSv3's post-op attributes): every create, mkdir, mknod,
//! symlink, link, unlink, rmdir and rename gives what a getattr of the
//! directory answers right after (a rename: both directories'), so a
//! gateway need not ask.

mod support;
use support::*;
use xlator::*;

/// The directory's attributes as a getattr answers them now.
async fn now(p: &dyn Translator, dir: &Loc) -> Attr {
    p.getattr(dir).await.unwrap()
}

#[tokio::test]
async fn every_namespace_change_answers_with_its_directory_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = posix::posix(tmp.path(), 64).unwrap();
    let p: &dyn Translator = &*p;
    let d = p.mkdir(&root(), &nf("d")).await.unwrap();
    assert_eq!(d.dir, Some(now(p, &root()).await), "mkdir in the root");
    let d = at("d", d.attr.fid);
    let e = at("e", p.mkdir(&root(), &nf("e")).await.unwrap().attr.fid);

    let made = p.create(&d, &nf("f"), libc::O_RDWR).await.unwrap();
    let after = made.dir.expect("create");
    assert_eq!(after, now(p, &d).await, "create");
    assert_eq!(after.fid, d.fid.unwrap());
    let f = at("d/f", made.attr.fid);
    p.release(&f).await.unwrap();
    let sub = p.mkdir(&d, &nf("sub")).await.unwrap().dir.expect("mkdir");
    assert_eq!((sub.clone(), sub.nlink), (now(p, &d).await, 3), "mkdir: a subdirectory more");
    let s = p.symlink(&d, &nf("s"), "f").await.unwrap().dir;
    assert_eq!(s, Some(now(p, &d).await), "symlink");
    let n = p.mknod(&d, &nf("n"), libc::S_IFIFO | 0o644, 0).await.unwrap().dir;
    assert_eq!(n, Some(now(p, &d).await), "mknod");
    let l = p.link(&f, &e, "l").await.unwrap().dir;
    assert_eq!(l, Some(now(p, &e).await), "link: the new name's directory");

    let moved = p.rename(&d, "f", &d, "g", RenameFlags::default()).await.unwrap();
    assert_eq!(moved.dir, Some(now(p, &d).await), "rename in one directory");
    assert_eq!(moved.newdir, moved.dir, "rename in one directory: the same");
    let moved = p.rename(&d, "g", &e, "l", RenameFlags::default()).await.unwrap();
    assert_eq!((moved.dir, moved.newdir), (Some(now(p, &d).await), Some(now(p, &e).await)), "rename between directories");
    assert_eq!(moved.replaced.map(|r| r.dir), None, "a link of the same file: nothing replaced");

    let gone = p.unlink(&d, "s").await.unwrap();
    assert_eq!(gone.dir, Some(now(p, &d).await), "unlink");
    let gone = p.rmdir(&d, "sub").await.unwrap().dir.expect("rmdir");
    assert_eq!((gone.clone(), gone.nlink), (now(p, &d).await, 2), "rmdir: a subdirectory fewer");

    // a failed change answers an error, nothing else
    assert_eq!(p.rmdir(&d, "sub").await.unwrap_err(), FsError::ENOENT);
}
