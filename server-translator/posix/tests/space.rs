//! Space: the fd of a file whose last name goes away (unlink, rename over
//! it) is closed at once unless a gateway still has the file open, so its
//! space is freed at once; a write on a full disk says exactly what landed.

mod support;
use bytes::Bytes;
use support::*;
use xlator::*;

#[tokio::test]
async fn removing_the_last_name_closes_the_fd_unless_the_file_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let x: &dyn Translator = &*p;
    let data = Bytes::from(vec![7u8; 100_000]);
    // Written and closed (its fd stays cached), then removed: by unlink, by
    // a rename over it, and one made by mknod and never opened at all.
    for name in ["a", "b", "c"] {
        let f = nf(name);
        x.create(&root(), &f, libc::O_RDWR).await.unwrap();
        x.write(&at(name, f.fid), 0, data.clone()).await.unwrap();
        x.release(&at(name, f.fid)).await.unwrap();
    }
    let m = nf("m");
    x.mknod(&root(), &m, libc::S_IFREG | 0o644, 0).await.unwrap();
    x.write(&at("m", m.fid), 0, data.clone()).await.unwrap();
    assert!(p.posix().open_fds() >= 4);
    x.unlink(&root(), "a").await.unwrap();
    x.rename(&root(), "c", &root(), "b", RenameFlags::default()).await.unwrap();
    x.unlink(&root(), "m").await.unwrap();
    assert_eq!(deleted_fds_under(dir.path()), Vec::<String>::new(), "no fd keeps a removed file");

    // Open (twice) when its name goes: readable by id until the last release.
    let o = nf("o");
    x.create(&root(), &o, libc::O_RDWR).await.unwrap();
    x.open(&at("o", o.fid), libc::O_RDONLY).await.unwrap();
    x.write(&at("o", o.fid), 0, Bytes::from_static(b"still here")).await.unwrap();
    x.unlink(&root(), "o").await.unwrap();
    assert_eq!(deleted_fds_under(dir.path()).len(), 1);
    x.release(&at("o", o.fid)).await.unwrap();
    assert_eq!(&x.read(&at("o", o.fid), 0, 100).await.unwrap()[..], b"still here");
    x.release(&at("o", o.fid)).await.unwrap();
    assert_eq!(x.read(&at("o", o.fid), 0, 100).await.unwrap_err(), FsError::ENOENT);
    assert_eq!(deleted_fds_under(dir.path()), Vec::<String>::new());

    // A name that is not the last one keeps the file (and its fd).
    let h = nf("h");
    x.create(&root(), &h, libc::O_RDWR).await.unwrap();
    x.release(&at("h", h.fid)).await.unwrap();
    x.link(&at("h", h.fid), &root(), "h2").await.unwrap();
    x.write(&at("h", h.fid), 0, Bytes::from_static(b"linked")).await.unwrap();
    x.unlink(&root(), "h").await.unwrap();
    assert_eq!(&x.read(&at("h2", h.fid), 0, 100).await.unwrap()[..], b"linked");
}

/// On a 1 MiB file system: a write that fills it lands a prefix and says
/// so; one that cannot land anything fails and changes nothing (no size
/// grown over a hole); deleting the filler frees its space at once.
#[tokio::test]
async fn a_full_disk_short_writes_say_what_landed_and_deleting_frees_space_at_once() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = Tmpfs::mount(&dir.path().join("small"), "1m");
    let p = posix::posix(&fs.0, 64).unwrap();
    let x: &dyn Translator = &*p;
    let big = nf("big");
    x.create(&root(), &big, libc::O_RDWR).await.unwrap();
    let l = at("big", big.fid);
    let data: Vec<u8> = (0..2u32 << 20).map(|i| (i % 251) as u8 + 1).collect();
    let w = x.write(&l, 0, Bytes::from(data.clone())).await.unwrap();
    let n = w.written as usize;
    assert!(n > 0 && n < data.len(), "a short count: {n}");
    assert_eq!(w.attr.unwrap().size, n as u64);
    let back = x.read(&l, 0, 4 << 20).await.unwrap();
    assert_eq!(back.len(), n, "the size is what landed");
    assert!(back[..] == data[..n], "what landed is the prefix, no zero-filled hole in it");
    // Nothing more fits: an error, and the file is unchanged — also for a
    // write far past the end (no size grown over a hole).
    for off in [n as u64, n as u64 + (64 << 20)] {
        assert_eq!(x.write(&l, off, Bytes::from_static(&[9; 65536])).await.unwrap_err(), FsError::ENOSPC);
        assert_eq!(x.getattr(&l).await.unwrap().size, n as u64, "write at {off}");
    }
    // The gateway closes it, the user deletes it: the space is back now.
    x.release(&l).await.unwrap();
    x.unlink(&root(), "big").await.unwrap();
    let next = nf("next");
    x.create(&root(), &next, libc::O_RDWR).await.unwrap();
    let w = x.write(&at("next", next.fid), 0, Bytes::from(data[..512 << 10].to_vec())).await.unwrap();
    assert_eq!(w.written, 512 << 10, "the deleted file's space was freed");
    drop(fs);
}
