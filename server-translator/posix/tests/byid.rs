//! Objects are reached by id, directories included: a directory renamed
//! elsewhere is found under a stale path; a tree whose paths are far
//! longer than PATH_MAX works for every operation; a stale, torn, cyclic
//! or forged record never yields another object; an export made before
//! records existed is upgraded as it is used. "Fresh" servers (a new
//! `Posix` over the same export) have no directory fds cached, so they
//! must walk the records.

mod support;
use bytes::Bytes;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::*;
use xlator::*;

fn server(dir: &Path) -> Arc<posix::PosixTranslator> {
    posix::posix(dir, 64).unwrap()
}

fn marker(export: &Path, fid: FileId) -> PathBuf {
    let h = fid.to_hex();
    export.join(".imca/fids").join(&h[30..32]).join(format!("{h}.dir"))
}

fn set_record(export: &Path, fid: FileId, value: &[u8]) {
    let (p, n) = (CString::new(marker(export, fid).to_str().unwrap()).unwrap(), CString::new(posix::PLACE_XATTR).unwrap());
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

fn drop_record(export: &Path, fid: FileId) {
    let (p, n) = (CString::new(marker(export, fid).to_str().unwrap()).unwrap(), CString::new(posix::PLACE_XATTR).unwrap());
    unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) };
}

fn has_record(export: &Path, fid: FileId) -> bool {
    let (p, n) = (CString::new(marker(export, fid).to_str().unwrap()).unwrap(), CString::new(posix::PLACE_XATTR).unwrap());
    unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) > 0 }
}

fn place(parent: FileId, name: &str) -> Vec<u8> {
    format!("{}/{name}", parent.to_hex()).into_bytes()
}

#[tokio::test]
async fn a_directory_renamed_elsewhere_is_still_found_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let p = server(dir.path());
    let x: &dyn Translator = &*p;
    let (a, b, c) = (nf("a"), nf("b"), nf("c"));
    x.mkdir(&root(), &a).await.unwrap();
    x.mkdir(&at("a", a.fid), &b).await.unwrap();
    x.mkdir(&root(), &c).await.unwrap();
    let f = nf("f");
    x.create(&at("a/b", b.fid), &f, libc::O_RDWR).await.unwrap();

    // Another gateway renamed a/b to c/moved: this one still says a/b.
    x.rename(&at("a", a.fid), "b", &at("c", c.fid), "moved", RenameFlags::default()).await.unwrap();
    for s in [p.clone(), server(dir.path())] {
        let x: &dyn Translator = &*s;
        let stale = at("a/b", b.fid);
        assert_eq!(x.getattr(&stale).await.unwrap().fid, b.fid);
        assert_eq!(x.lookup(&stale, "f").await.unwrap().fid, f.fid);
        let names: Vec<_> = x.readdir(&stale, 0, 10, false).await.unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["f"]);
    }
    // A parent renamed too: the walk climbs through it.
    x.rename(&root(), "c", &root(), "c2", RenameFlags::default()).await.unwrap();
    let x: &dyn Translator = &*server(dir.path());
    assert_eq!(x.getattr(&at("a/b", b.fid)).await.unwrap().fid, b.fid);
    let e = nf("e");
    x.mkdir(&at("nowhere/b", b.fid), &e).await.unwrap();
    assert!(dir.path().join("c2/moved/e").is_dir(), "made where the directory really is");

    // Removed: its id finds nothing, even with a warm table.
    x.lookup(&at("x", e.fid), "nothing").await.unwrap_err();
    x.rmdir(&at("c2/moved", b.fid), "e").await.unwrap();
    assert_eq!(x.getattr(&at("c2/moved/e", e.fid)).await.unwrap_err(), FsError::ENOENT);
    assert!(!marker(dir.path(), e.fid).exists());
}

/// `depth` directories of 200-byte names: a path of `depth * 201` bytes.
fn deep_names(depth: usize) -> Vec<String> {
    (0..depth).map(|i| format!("{i:03}{}", "d".repeat(197))).collect()
}

#[tokio::test]
async fn trees_deeper_than_path_max_work_for_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let p = server(dir.path());
    let x: &dyn Translator = &*p;
    // 45 levels: 9 KiB of path, more than twice PATH_MAX.
    let names = deep_names(45);
    let mut locs = vec![root()];
    for n in &names {
        let parent = locs.last().unwrap().clone();
        let new = nf(n);
        x.mkdir(&parent, &new).await.unwrap();
        locs.push(Loc::new(parent.child(n).path, Some(new.fid)));
    }
    let deep = locs.last().unwrap().clone();
    assert!(deep.path.len() > 8 * 1024);

    // create, write, read, stat
    let f = nf("file");
    x.create(&deep, &f, libc::O_RDWR).await.unwrap();
    let fl = Loc::new(deep.child("file").path, Some(f.fid));
    x.write(&fl, 0, Bytes::from_static(b"deep data")).await.unwrap();
    assert_eq!(&x.read(&fl, 0, 100).await.unwrap()[..], b"deep data");
    assert_eq!(x.getattr(&fl).await.unwrap().size, 9);
    assert_eq!(x.lookup(&deep, "file").await.unwrap().fid, f.fid);
    // by path alone (no id): opened a PATH_MAX run at a time
    assert_eq!(x.getattr(&path(&fl.path)).await.unwrap().fid, f.fid);
    assert_eq!(x.getattr(&path(&deep.path)).await.unwrap().fid, deep.fid.unwrap());
    // ... and still confined: no symlink is followed on the way, no `..` taken.
    x.symlink(&locs[30], &nf("out"), "/").await.unwrap();
    assert_eq!(x.getattr(&path(&format!("{}/out/etc", locs[30].path))).await.unwrap_err(), FsError::ELOOP);
    assert_eq!(x.getattr(&path(&format!("{}/../{}", locs[30].path, names[29]))).await.unwrap_err(), FsError::EINVAL);
    x.unlink(&locs[30], "out").await.unwrap();

    // A fresh server finds the deepest directory by id alone (a walk of 45 records).
    let fresh = server(dir.path());
    let y: &dyn Translator = &*fresh;
    assert_eq!(y.getattr(&at("", deep.fid.unwrap())).await.unwrap().kind, FileKind::Dir);
    let listed: Vec<_> = y.readdir(&deep, 0, 10, true).await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(listed, ["file"]);

    // rename out of and into the deep tree
    let top = nf("top");
    x.create(&root(), &top, libc::O_RDWR).await.unwrap();
    x.write(&at("top", top.fid), 0, Bytes::from_static(b"from the top")).await.unwrap();
    x.rename(&root(), "top", &deep, "top-in-deep", RenameFlags::default()).await.unwrap();
    let moved = Loc::new(deep.child("top-in-deep").path, Some(top.fid));
    assert_eq!(&y.read(&moved, 0, 100).await.unwrap()[..], b"from the top");
    x.rename(&deep, "file", &root(), "file-out", RenameFlags::default()).await.unwrap();
    assert_eq!(&x.read(&at("file-out", f.fid), 0, 100).await.unwrap()[..], b"deep data");
    // a directory moved into the deep tree, and a deep one moved out
    let d = nf("dir");
    x.mkdir(&root(), &d).await.unwrap();
    x.rename(&root(), "dir", &deep, "dir", RenameFlags::default()).await.unwrap();
    assert_eq!(server(dir.path()).getattr(&at("dir", d.fid)).await.unwrap().fid, d.fid, "stale path, found by id");
    let mid = &locs[20];
    x.rename(mid, &names[20], &root(), "lifted", RenameFlags::default()).await.unwrap();
    let z = server(dir.path());
    assert_eq!(z.getattr(&deep).await.unwrap().fid, deep.fid.unwrap(), "found by id under its old path");
    assert_eq!(z.lookup(&deep, "dir").await.unwrap().fid, d.fid);
    x.rename(&root(), "lifted", mid, &names[20], RenameFlags::default()).await.unwrap();

    // unlink and rmdir everything, deepest first
    x.unlink(&deep, "top-in-deep").await.unwrap();
    x.rmdir(&deep, "dir").await.unwrap();
    for i in (0..names.len()).rev() {
        x.rmdir(&locs[i], &names[i]).await.unwrap();
    }
    let left: Vec<_> = x.readdir(&root(), 0, 10, false).await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(left, ["file-out"]);
}

#[tokio::test]
async fn stale_torn_cyclic_or_forged_records_never_yield_another_object() {
    let dir = tempfile::tempdir().unwrap();
    let x: &dyn Translator = &*server(dir.path());
    let (d1, d2) = (nf("d1"), nf("d2"));
    x.mkdir(&root(), &d1).await.unwrap();
    x.mkdir(&root(), &d2).await.unwrap();
    let s = nf("s");
    x.symlink(&root(), &s, "d2").await.unwrap();
    let forgeries: Vec<Vec<u8>> = vec![
        place(FileId::ROOT, "d2"),                                         // another directory
        place(FileId::ROOT, "s"),                                          // a symlink to it
        place(FileId::ROOT, ".imca"),                                      // IMCa's own state
        place(d1.fid, "x"),                                                // itself as parent
        [place(FileId::ROOT, "nope"), b"\0".to_vec(), place(FileId::ROOT, "d2")].concat(),
        b"garbage".to_vec(),
    ];
    for forged in &forgeries {
        set_record(dir.path(), d1.fid, forged);
        let fresh = server(dir.path());
        // No path to fall back on: the id alone must not find d2 (or anything).
        let r = fresh.getattr(&at("", d1.fid)).await;
        assert_eq!(r.unwrap_err(), FsError::ENOENT, "{:?}", String::from_utf8_lossy(forged));
        assert_eq!(fresh.lookup(&at("", d1.fid), "x").await.unwrap_err(), FsError::ENOENT);
    }
    // A cycle through two records ends (ENOENT), it does not hang.
    set_record(dir.path(), d1.fid, &place(d2.fid, "d1"));
    set_record(dir.path(), d2.fid, &place(d1.fid, "d2"));
    assert_eq!(server(dir.path()).getattr(&at("", d1.fid)).await.unwrap_err(), FsError::ENOENT);
    // With the real path the directory is found, checked, and its record
    // repaired (by a call that resolves on the blocking path: a listing).
    let fresh = server(dir.path());
    fresh.readdir(&at("d1", d1.fid), 0, 10, false).await.unwrap();
    assert_eq!(server(dir.path()).getattr(&at("", d1.fid)).await.unwrap().fid, d1.fid, "repaired");
    // A path that now names another directory is not the one asked for.
    assert_eq!(server(dir.path()).getattr(&at("d1", d2.fid)).await.unwrap_err(), FsError::ENOENT);

    // Torn: a rename recorded both places, then the server stopped before
    // renaming. The old place is used and becomes the record.
    set_record(dir.path(), d2.fid, &[place(d1.fid, "d2-new"), b"\0".to_vec(), place(FileId::ROOT, "d2")].concat());
    assert_eq!(server(dir.path()).getattr(&at("", d2.fid)).await.unwrap().fid, d2.fid);
    std::fs::rename(dir.path().join("d2"), dir.path().join("d2-elsewhere")).unwrap();
    assert_eq!(server(dir.path()).getattr(&at("", d2.fid)).await.unwrap_err(), FsError::ENOENT, "the record was rewritten to the old place");
}

#[tokio::test]
async fn an_export_from_before_records_is_upgraded_as_it_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let x: &dyn Translator = &*server(dir.path());
    let (a, b) = (nf("a"), nf("b"));
    x.mkdir(&root(), &a).await.unwrap();
    x.mkdir(&at("a", a.fid), &b).await.unwrap();
    // The old layout: empty markers.
    drop_record(dir.path(), a.fid);
    drop_record(dir.path(), b.fid);
    let old = server(dir.path());
    assert_eq!(old.getattr(&at("", b.fid)).await.unwrap_err(), FsError::ENOENT, "no record, no path");
    assert_eq!(old.getattr(&at("a/b", b.fid)).await.unwrap().fid, b.fid, "found by path");
    // Listing a directory (`find`, `ls -R`) writes its record.
    old.readdir(&at("a/b", b.fid), 0, 10, false).await.unwrap();
    assert!(has_record(dir.path(), b.fid), "and its record written");
    old.readdir(&at("a", a.fid), 0, 10, false).await.unwrap();
    let later = server(dir.path());
    assert_eq!(later.getattr(&at("", b.fid)).await.unwrap().fid, b.fid, "by id from now on");

    // A directory made behind IMCa's back gets its id and record at lookup.
    std::fs::create_dir(dir.path().join("a/b/local")).unwrap();
    let l = later.lookup(&at("a/b", b.fid), "local").await.unwrap();
    assert_eq!(server(dir.path()).getattr(&at("", l.fid)).await.unwrap().fid, l.fid);
}
