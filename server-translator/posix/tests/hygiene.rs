//! Export hygiene: by default no device nodes and no set-id bits reach the
//! export (`nodev,nosuid`), whatever the client asks; the policy's options
//! allow them; root squash gives root's new objects to nobody.

mod support;
use std::os::unix::fs::MetadataExt;
use support::*;
use xlator::*;

fn mode_on_disk(dir: &std::path::Path, name: &str) -> u32 {
    std::fs::symlink_metadata(dir.join(name)).unwrap().mode()
}

#[tokio::test]
async fn device_nodes_are_refused_by_default() {
    if !is_root() {
        eprintln!("skipped: creating device nodes needs root (the kernel refuses them anyway)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    // The attack: a block device node of the disk holding this very directory.
    let disk = std::fs::metadata(dir.path()).unwrap().dev() as u32;
    for (name, fmt, rdev) in [("disk", libc::S_IFBLK, disk), ("mem", libc::S_IFCHR, 1 << 8 | 1)] {
        let e = p.mknod(&root(), &nf(name), fmt | 0o666, rdev).await.unwrap_err();
        assert_eq!(e, FsError::EPERM, "{name}");
        assert!(std::fs::symlink_metadata(dir.path().join(name)).is_err(), "{name} was not made");
    }
    // Fifos, sockets and files made by mknod are fine.
    p.mknod(&root(), &nf("fifo"), libc::S_IFIFO | 0o644, 0).await.unwrap();
    p.mknod(&root(), &nf("sock"), libc::S_IFSOCK | 0o644, 0).await.unwrap();
    p.mknod(&root(), &nf("file"), libc::S_IFREG | 0o644, 0).await.unwrap();

    let allowed = tempfile::tempdir().unwrap();
    let p = posix_with(allowed.path(), posix::ExportPolicy { allow_devices: true, ..Default::default() });
    let a = p.mknod(&root(), &nf("null"), libc::S_IFCHR | 0o666, 1 << 8 | 3).await.unwrap().attr;
    assert_eq!(a.rdev, 1 << 8 | 3);
    assert_eq!(mode_on_disk(allowed.path(), "null") & libc::S_IFMT, libc::S_IFCHR);
}

#[tokio::test]
async fn set_id_bits_are_dropped_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    // A setuid-root program, a setgid directory, a setuid file by mknod.
    let f = NewFile { perm: 0o4755, ..nf("su") };
    assert_eq!(p.create(&root(), &f, libc::O_RDWR).await.unwrap().attr.perm, 0o755);
    assert_eq!(p.mkdir(&root(), &NewFile { perm: 0o2775, ..nf("d") }).await.unwrap().attr.perm, 0o775);
    assert_eq!(p.mknod(&root(), &NewFile { perm: 0o6755, ..nf("n") }, libc::S_IFREG, 0).await.unwrap().attr.perm, 0o755);
    // chmod: dropped too; other bits (sticky included) are kept.
    let chmod = |perm| SetAttr { perm: Some(perm), ..Default::default() };
    assert_eq!(p.setattr(&at("su", f.fid), &chmod(0o6711)).await.unwrap().perm, 0o711);
    assert_eq!(p.setattr(&path("d"), &chmod(0o3777)).await.unwrap().perm, 0o1777);
    for name in ["su", "d", "n"] {
        let m = mode_on_disk(dir.path(), name);
        assert_eq!(m & (libc::S_ISUID | libc::S_ISGID), 0, "{name}: {m:o}");
    }
    // A directory created inside a set-group-id one made behind our back
    // does not inherit the bit either.
    std::fs::create_dir(dir.path().join("g")).unwrap();
    std::fs::set_permissions(dir.path().join("g"), std::os::unix::fs::PermissionsExt::from_mode(0o2777)).unwrap();
    assert_eq!(p.mkdir(&path("g"), &NewFile { perm: 0o755, ..nf("sub") }).await.unwrap().attr.perm, 0o755);

    let allowed = tempfile::tempdir().unwrap();
    let p = posix_with(allowed.path(), posix::ExportPolicy { allow_setid: true, ..Default::default() });
    assert_eq!(p.create(&root(), &NewFile { perm: 0o4755, ..nf("su") }, libc::O_RDWR).await.unwrap().attr.perm, 0o4755);
    assert_eq!(p.mkdir(&root(), &NewFile { perm: 0o2775, ..nf("d") }).await.unwrap().attr.perm, 0o2775);
    assert_eq!(mode_on_disk(allowed.path(), "su") & 0o7777, 0o4755);
}

#[tokio::test]
async fn root_squash_gives_roots_objects_to_nobody() {
    if !is_root() {
        eprintln!("skipped: only a root server sets owners");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = posix_with(dir.path(), posix::ExportPolicy { root_squash: true, ..Default::default() });
    let a = p.create(&root(), &nf("f"), libc::O_RDWR).await.unwrap().attr;
    assert_eq!((a.uid, a.gid), (posix::NOBODY, posix::NOBODY));
    let md = std::fs::metadata(dir.path().join("f")).unwrap();
    assert_eq!((md.uid(), md.gid()), (posix::NOBODY, posix::NOBODY));
    let u = NewFile { owner: Owner { uid: 1000, gid: 100 }, ..nf("u") };
    let a = p.mkdir(&root(), &u).await.unwrap().attr;
    assert_eq!((a.uid, a.gid), (1000, 100), "other owners are kept");
    // chown to root: refused, nothing changed; to others: done.
    for set in [SetAttr { uid: Some(0), ..Default::default() }, SetAttr { gid: Some(0), ..Default::default() }] {
        assert_eq!(p.setattr(&path("u"), &set).await.unwrap_err(), FsError::EPERM);
    }
    assert_eq!(p.getattr(&path("u")).await.unwrap().uid, 1000);
    let a = p.setattr(&path("u"), &SetAttr { uid: Some(2000), gid: Some(200), ..Default::default() }).await.unwrap();
    assert_eq!((a.uid, a.gid), (2000, 200));

    // Without squash (the default) root stays root.
    let plain = tempfile::tempdir().unwrap();
    let p = posix::posix(plain.path(), 64).unwrap();
    assert_eq!(p.create(&root(), &nf("f"), libc::O_RDWR).await.unwrap().attr.uid, 0);
}
