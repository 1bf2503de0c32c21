//! What a client speaking the storage RPC directly (no gateway, no stripe)
//! can no longer do to a server: take over another file's id, leave a
//! device node or a setuid-root program in the export, own files as root
//! under `--root-squash`, or keep a deleted file's space.

mod common;
use bytes::Bytes;
use common::*;
use std::os::unix::fs::MetadataExt;
use xlator::*;

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// The attack: a raw create carrying another file's id made root's read of
/// that file (by id, as every gateway reads) return the attacker's content.
#[tokio::test]
async fn a_raw_create_with_another_files_id_cannot_take_it_over() {
    let e = env().await;
    let c = &e.c;
    let secret = NewFile { perm: 0o600, ..nf("secret") };
    c.create(&root(), &secret, libc::O_RDWR).await.unwrap();
    c.write(&at("secret", secret.fid), 0, Bytes::from_static(b"root only")).await.unwrap();
    let d = nf("private");
    c.mkdir(&root(), &d).await.unwrap();

    let user = Owner { uid: 1001, gid: 1001 };
    for victim in [secret.fid, d.fid] {
        let evil = NewFile { fid: victim, owner: user, perm: 0o666, ..nf("evil") };
        let open_evil = NewFile { exclusive: false, ..evil.clone() };
        assert_eq!(c.create(&root(), &evil, libc::O_RDWR).await.unwrap_err(), FsError::EEXIST);
        assert_eq!(c.create(&root(), &open_evil, libc::O_RDWR | libc::O_TRUNC).await.unwrap_err(), FsError::EEXIST);
        assert_eq!(c.mkdir(&root(), &evil).await.unwrap_err(), FsError::EEXIST);
        assert_eq!(c.mknod(&root(), &evil, libc::S_IFREG | 0o666, 0).await.unwrap_err(), FsError::EEXIST);
        assert_eq!(c.symlink(&root(), &evil, "secret").await.unwrap_err(), FsError::EEXIST);
        assert!(std::fs::symlink_metadata(e.export.join("evil")).is_err(), "nothing was created");
    }
    assert_eq!(c.mkdir(&root(), &NewFile { fid: FileId::ROOT, ..nf("evil") }).await.unwrap_err(), FsError::EINVAL);

    // Root's reads by id (the path the attacker chose included) still get root's bytes.
    for p in ["secret", "evil"] {
        assert_eq!(&c.read(&at(p, secret.fid), 0, 100).await.unwrap()[..], b"root only", "{p}");
    }
    assert_eq!(c.getattr(&at("secret", secret.fid)).await.unwrap().perm, 0o600);
    assert_eq!(c.getattr(&at("private", d.fid)).await.unwrap().kind, FileKind::Dir);
}

#[tokio::test]
async fn device_nodes_and_set_id_bits_stay_out_of_the_export() {
    let e = env().await;
    let c = &e.c;
    if is_root() {
        // A block device node of the system disk, and /dev/mem.
        let disk = std::fs::metadata("/").unwrap().dev() as u32;
        for (name, fmt, rdev) in [("sda", libc::S_IFBLK, disk), ("mem", libc::S_IFCHR, 1 << 8 | 1)] {
            assert_eq!(c.mknod(&root(), &nf(name), fmt | 0o666, rdev).await.unwrap_err(), FsError::EPERM, "{name}");
            assert!(std::fs::symlink_metadata(e.export.join(name)).is_err(), "{name} was not made");
        }
    }
    // A setuid-root program: created, chmodded, made by mknod; a setgid directory.
    let su = NewFile { perm: 0o4755, ..nf("su") };
    assert_eq!(c.create(&root(), &su, libc::O_RDWR).await.unwrap().attr.perm, 0o755);
    let chmod = SetAttr { perm: Some(0o6755), ..Default::default() };
    assert_eq!(c.setattr(&at("su", su.fid), &chmod).await.unwrap().perm, 0o755);
    assert_eq!(c.mknod(&root(), &NewFile { perm: 0o4755, ..nf("su2") }, libc::S_IFREG, 0).await.unwrap().attr.perm, 0o755);
    assert_eq!(c.mkdir(&root(), &NewFile { perm: 0o2775, ..nf("sg") }).await.unwrap().attr.perm, 0o775);
    for name in ["su", "su2", "sg"] {
        let m = std::fs::metadata(e.export.join(name)).unwrap().mode();
        assert_eq!(m & (libc::S_ISUID | libc::S_ISGID), 0, "{name}: {m:o}");
    }
    c.mknod(&root(), &nf("fifo"), libc::S_IFIFO | 0o644, 0).await.unwrap();
}

#[tokio::test]
async fn allow_flags_and_root_squash() {
    if !is_root() {
        eprintln!("skipped: devices and owners need a root server");
        return;
    }
    let e = env_with(|a| {
        a.allow_devices = true;
        a.allow_setid = true;
    })
    .await;
    let a = e.c.mknod(&root(), &nf("null"), libc::S_IFCHR | 0o666, 1 << 8 | 3).await.unwrap().attr;
    assert_eq!(a.rdev, 1 << 8 | 3);
    assert_eq!(e.c.create(&root(), &NewFile { perm: 0o4755, ..nf("su") }, 0).await.unwrap().attr.perm, 0o4755);
    assert_eq!(std::fs::metadata(e.export.join("su")).unwrap().mode() & 0o7777, 0o4755);

    let e = env_with(|a| a.root_squash = true).await;
    let f = nf("f");
    let a = e.c.create(&root(), &f, 0).await.unwrap().attr;
    assert_eq!((a.uid, a.gid), (65534, 65534));
    assert_eq!(std::fs::metadata(e.export.join("f")).unwrap().uid(), 65534);
    let to_root = SetAttr { uid: Some(0), gid: Some(0), ..Default::default() };
    assert_eq!(e.c.setattr(&at("f", f.fid), &to_root).await.unwrap_err(), FsError::EPERM);
    let u = NewFile { owner: Owner { uid: 1001, gid: 1001 }, ..nf("u") };
    assert_eq!(e.c.create(&root(), &u, 0).await.unwrap().attr.uid, 1001);
}

/// The attack: `rm` of the files that filled the disk did not free their
/// space (the fd cache kept them open), so writes still failed.
#[tokio::test]
async fn deleting_files_frees_their_space_at_once() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("small"), "1m");
    let server = storage_server::start(common::args(&fs.0)).await.unwrap();
    let c = protocol_client::connect(&server.addr.to_string(), common::opts()).await.unwrap();
    // Fill the disk with a few files, as a gateway would (create, write, release).
    let chunk = Bytes::from(vec![0x5au8; 128 * 1024]);
    let mut names = Vec::new();
    'fill: for i in 0.. {
        let f = nf(&format!("f{i}"));
        c.create(&root(), &f, libc::O_RDWR).await.unwrap();
        names.push(f.clone());
        for k in 0..2u64 {
            match c.write(&at(&f.name, f.fid), k * chunk.len() as u64, chunk.clone()).await {
                Ok(w) if w.written as usize == chunk.len() => {}
                _ => {
                    c.release(&at(&f.name, f.fid)).await.unwrap();
                    break 'fill;
                }
            }
        }
        c.release(&at(&f.name, f.fid)).await.unwrap();
    }
    assert!(names.len() >= 2);
    for f in &names {
        c.unlink(&root(), &f.name).await.unwrap();
    }
    // The removed files may be held a moment for gateways' opens on the
    // way (posix removal holds); a write that finds the disk full ends that.
    let again = nf("again");
    c.create(&root(), &again, libc::O_RDWR).await.unwrap();
    for k in 0..4u64 {
        let w = c.write(&at("again", again.fid), k * chunk.len() as u64, chunk.clone()).await.unwrap();
        assert_eq!(w.written as usize, chunk.len(), "the deleted files' space is free again");
    }
    let deleted: Vec<_> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(&fs.0) && t.to_string_lossy().ends_with(" (deleted)"))
        .collect();
    assert!(deleted.is_empty(), "the server keeps deleted files open: {deleted:?}");
    server.shutdown().await;
    drop(fs);
}
