//! Every file type keeps its type and device number (issue 11): what mknod
//! made, lookup, getattr and readdirplus answer with the kind and `rdev` a
//! local `stat` of the node shows; IMCa's own id attribute of a special
//! file (`trusted.imca.fid`) stays invisible while clients' `trusted.*` and
//! `security.*` attributes work; open of a socket is ENXIO as on Linux.

mod support;
use std::os::unix::fs::MetadataExt;
use support::*;
use xlator::*;

/// (name, S_IFMT, kind, rdev asked): devices keep theirs, mknod(2)
/// ignores the number for anything else.
const KINDS: [(&str, u32, FileKind, u32); 4] = [
    ("fifo", libc::S_IFIFO, FileKind::Fifo, 0),
    ("sock", libc::S_IFSOCK, FileKind::Socket, 0),
    ("null", libc::S_IFCHR, FileKind::CharDev, 1 << 8 | 3),
    ("loop", libc::S_IFBLK, FileKind::BlockDev, 7 << 8 | 200),
];

#[tokio::test]
async fn special_files_keep_their_kind_and_device_number() {
    if !is_root() {
        eprintln!("skipped: device nodes need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = posix_with(dir.path(), posix::ExportPolicy { allow_devices: true, ..Default::default() });
    for (name, fmt, kind, rdev) in KINDS {
        let made = p.mknod(&root(), &nf(name), fmt | 0o640, rdev).await.unwrap().attr;
        let local = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
        assert_eq!(local.mode() & libc::S_IFMT, fmt, "{name} on disk");
        assert_eq!((made.kind, made.rdev, made.perm), (kind, local.rdev() as u32, local.mode() & 0o7777), "{name} from mknod");
        assert_eq!(made.rdev, rdev, "{name}: the number asked for");
        let looked = p.lookup(&root(), name).await.unwrap();
        assert_eq!((looked.kind, looked.rdev, looked.fid), (kind, rdev, made.fid), "{name} from lookup");
        assert_eq!(p.getattr(&at(name, made.fid)).await.unwrap().kind, kind, "{name} by id");
    }
    let listed = p.readdir(&root(), 0, 100, true).await.unwrap();
    for (name, _, kind, rdev) in KINDS {
        let e = listed.iter().find(|e| e.name == name).unwrap();
        assert_eq!(e.kind, kind, "{name} listed");
        assert_eq!(e.attr.as_ref().unwrap().rdev, rdev, "{name} listed");
    }
}

#[tokio::test]
async fn opening_a_socket_is_enxio_and_a_fifo_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let (s, f) = (nf("sock"), nf("fifo"));
    p.mknod(&root(), &s, libc::S_IFSOCK | 0o644, 0).await.unwrap();
    p.mknod(&root(), &f, libc::S_IFIFO | 0o644, 0).await.unwrap();
    assert_eq!(p.open(&at("sock", s.fid), libc::O_RDONLY).await.unwrap_err(), FsError(libc::ENXIO));
    // Nothing is opened on the server (a fifo's open would wait for a
    // writer there); with no writer this returns at once.
    p.open(&at("fifo", f.fid), libc::O_RDONLY).await.unwrap();
    assert_eq!(p.read(&at("fifo", f.fid), 0, 10).await.unwrap_err(), FsError::EINVAL);
}

#[tokio::test]
async fn trusted_and_security_xattrs_work_and_imca_ids_stay_hidden() {
    if !is_root() {
        eprintln!("skipped: trusted.* needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let (f, s) = (nf("file"), nf("fifo"));
    p.create(&root(), &f, libc::O_RDWR).await.unwrap();
    p.mknod(&root(), &s, libc::S_IFIFO | 0o644, 0).await.unwrap();
    let none = XattrFlags::default();
    for (name, fid) in [("file", f.fid), ("fifo", s.fid)] {
        let l = at(name, fid);
        p.setxattr(&l, "trusted.t", b"T", none).await.unwrap();
        p.setxattr(&l, "security.s", b"S", none).await.unwrap();
        assert_eq!(&p.getxattr(&l, "trusted.t").await.unwrap()[..], b"T");
        let mut names = p.listxattr(&l).await.unwrap();
        names.sort();
        assert_eq!(names, ["security.s", "trusted.t"], "{name}: IMCa's id is not listed");
        for own in ["trusted.imca.fid", "user.imca.fid"] {
            assert_eq!(p.getxattr(&l, own).await.unwrap_err(), FsError::ENODATA, "{name} {own}");
            assert_eq!(p.setxattr(&l, own, b"0", none).await.unwrap_err(), FsError::EPERM, "{name} {own}");
            assert_eq!(p.removexattr(&l, own).await.unwrap_err(), FsError::EPERM, "{name} {own}");
        }
        p.removexattr(&l, "trusted.t").await.unwrap();
        assert_eq!(p.getxattr(&l, "trusted.t").await.unwrap_err(), FsError::ENODATA);
    }
    // the ids are still there, and still the ones given
    assert_eq!(p.lookup(&root(), "fifo").await.unwrap().fid, s.fid);
    assert_eq!(p.lookup(&root(), "file").await.unwrap().fid, f.fid);
}

#[tokio::test]
async fn file_capabilities_need_allow_setid() {
    // A v2 capability set granting nothing: whether it may be set at all
    // is what the export decides.
    let caps = {
        let mut v = 0x0200_0000u32.to_le_bytes().to_vec();
        v.extend_from_slice(&[0u8; 16]);
        v
    };
    let none = XattrFlags::default();
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let f = nf("prog");
    p.create(&root(), &f, libc::O_RDWR).await.unwrap();
    assert_eq!(p.setxattr(&at("prog", f.fid), posix::CAPABILITY_XATTR, &caps, none).await.unwrap_err(), FsError::EPERM);
    if !is_root() {
        return;
    }
    let allowed = tempfile::tempdir().unwrap();
    let p = posix_with(allowed.path(), posix::ExportPolicy { allow_setid: true, ..Default::default() });
    p.create(&root(), &f, libc::O_RDWR).await.unwrap();
    p.setxattr(&at("prog", f.fid), posix::CAPABILITY_XATTR, &caps, none).await.unwrap();
    p.removexattr(&at("prog", f.fid), posix::CAPABILITY_XATTR).await.unwrap();
}
