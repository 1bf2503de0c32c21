//! Paths that try to leave the export: `..`, absolute paths, symlinks
//! pointing out (placed in the export behind the server's back, or created
//! through the RPC). Nothing outside may be read, written or listed.

mod common;
use bytes::Bytes;
use common::*;
use xlator::*;

#[tokio::test]
async fn dotdot_and_absolute_paths_are_refused() {
    let e = env().await;
    let c = &e.c;
    let outside = e.export.parent().unwrap().join("secret");
    std::fs::write(&outside, b"top secret").unwrap();
    for p in ["..", "../secret", "a/../../secret", "/etc/passwd", "./x", "a//b", "x/."] {
        let err = c.getattr(&path(p)).await.unwrap_err();
        assert!(err == FsError::EINVAL || err == FsError::ENOENT, "{p}: {err:?}");
        assert!(c.read(&path(p), 0, 100).await.is_err(), "{p}");
        assert!(c.write(&path(p), 0, Bytes::from_static(b"pwned")).await.is_err(), "{p}");
        assert!(c.readdir(&path(p), 0, 100, false).await.is_err(), "{p}");
        assert!(c.create(&path(p), &nf("x"), 0).await.is_err(), "{p}");
    }
    for name in ["..", ".", "a/b", ""] {
        assert!(c.lookup(&root(), name).await.is_err(), "{name:?}");
        assert!(c.create(&root(), &nf(name), 0).await.is_err(), "{name:?}");
        assert!(c.mkdir(&root(), &nf(name)).await.is_err(), "{name:?}");
        assert!(c.unlink(&root(), name).await.is_err(), "{name:?}");
        assert!(c.rename(&root(), name, &root(), "z", RenameFlags::default()).await.is_err(), "{name:?}");
    }
    assert_eq!(std::fs::read(&outside).unwrap(), b"top secret");
}

#[tokio::test]
async fn symlinks_pointing_out_are_never_followed() {
    let e = env().await;
    let c = &e.c;
    let out_dir = e.export.parent().unwrap().join("outside");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("secret"), b"top secret").unwrap();
    // One planted directly in the export, one made through the RPC.
    std::os::unix::fs::symlink(&out_dir, e.export.join("planted")).unwrap();
    c.symlink(&root(), &nf("made"), "../outside").await.unwrap();
    std::os::unix::fs::symlink(out_dir.join("secret"), e.export.join("file-link")).unwrap();

    for l in ["planted", "made"] {
        assert_eq!(c.lookup(&root(), l).await.unwrap().kind, FileKind::Symlink);
        let inner = format!("{l}/secret");
        assert!(c.getattr(&path(&inner)).await.is_err(), "{inner}");
        assert!(c.lookup(&path(l), "secret").await.is_err(), "{l}");
        assert!(c.read(&path(&inner), 0, 100).await.is_err());
        assert!(c.write(&path(&inner), 0, Bytes::from_static(b"pwned")).await.is_err());
        assert!(c.create(&path(l), &nf("new"), 0).await.is_err());
        assert!(c.mkdir(&path(l), &nf("newdir")).await.is_err());
        assert!(c.readdir(&path(l), 0, 100, false).await.is_err());
        assert!(c.setattr(&path(&inner), &SetAttr { size: Some(0), ..Default::default() }).await.is_err());
        assert!(c.setxattr(&path(&inner), "user.x", b"1", XattrFlags::default()).await.is_err());
        assert!(c.rename(&path(l), "secret", &root(), "stolen", RenameFlags::default()).await.is_err());
        assert!(c.unlink(&path(l), "secret").await.is_err());
    }
    // A symlink to a file outside: reading, writing, truncating or opening
    // it never touches the target.
    let fl = path("file-link");
    assert!(c.read(&fl, 0, 100).await.is_err());
    assert!(c.write(&fl, 0, Bytes::from_static(b"pwned")).await.is_err());
    assert!(c.open(&fl, libc::O_RDWR | libc::O_TRUNC).await.is_err());
    assert!(c.setattr(&fl, &SetAttr { size: Some(0), ..Default::default() }).await.is_err());
    assert!(c.create(&root(), &NewFile { exclusive: false, ..nf("file-link") }, libc::O_TRUNC).await.is_err());
    // chmod/chown on the link must not change the target.
    let _ = c.setattr(&fl, &SetAttr { perm: Some(0o777), uid: Some(4242), ..Default::default() }).await;
    // Hard-linking the symlink links the symlink itself, not its target.
    let a = c.link(&fl, &root(), "link-of-link").await.unwrap().attr;
    assert_eq!(a.kind, FileKind::Symlink);

    assert_eq!(std::fs::read(out_dir.join("secret")).unwrap(), b"top secret");
    let md = std::fs::metadata(out_dir.join("secret")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(md.uid(), 4242);
    assert_ne!(md.mode() & 0o777, 0o777);
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1, "nothing created outside");
}

#[tokio::test]
async fn the_meta_dir_is_out_of_reach() {
    let e = env().await;
    let c = &e.c;
    for p in [".imca", ".imca/volume.json", ".imca/fids"] {
        assert!(c.getattr(&path(p)).await.is_err(), "{p}");
        assert!(c.write(&path(p), 0, Bytes::from_static(b"x")).await.is_err(), "{p}");
    }
    assert!(c.unlink(&root(), ".imca").await.is_err());
    assert!(c.rmdir(&root(), ".imca").await.is_err());
    assert!(c.rename(&root(), ".imca", &root(), "x", RenameFlags::default()).await.is_err());
    c.mkdir(&root(), &nf("d")).await.unwrap();
    assert!(c.rename(&path("d"), "x", &root(), ".imca", RenameFlags::default()).await.is_err());
    assert!(c.symlink(&root(), &nf(".imca"), "x").await.is_err());
    assert!(c.link(&path("d"), &root(), ".imca").await.is_err());
    // A subdirectory may be called .imca: only the top one is reserved.
    c.mkdir(&path("d"), &nf(".imca")).await.unwrap();
    assert!(e.export.join(".imca/volume.json").exists());
}
