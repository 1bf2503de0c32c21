//! The posix fast paths (page cache / dentry cache answers on the async
//! thread) must give exactly what the blocking path gives, and fall back
//! when the kernel cannot answer from memory.

mod support;

use bytes::Bytes;
use support::*;
use std::os::fd::AsRawFd;
use xlator::*;

#[tokio::test]
async fn fast_and_slow_paths_agree() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let x: &dyn Translator = &*p;
    let f = nf("f");
    x.create(&root(), &f, 0).await.unwrap();
    let l = at("f", f.fid);
    let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 253) as u8).collect();
    x.write(&l, 0, Bytes::from(data.clone())).await.unwrap();

    // Cached pages: served by the fast path.
    let h0 = p.posix().fast_path_hits();
    assert_eq!(x.read(&l, 0, 1 << 20).await.unwrap(), Bytes::from(data.clone()));
    assert_eq!(&x.read(&l, (1 << 20) - 3, 100).await.unwrap()[..], &data[(1 << 20) - 3..], "short only at EOF");
    assert!(x.read(&l, 5 << 20, 100).await.unwrap().is_empty());
    assert!(p.posix().fast_path_hits() >= h0 + 3);

    // Evicted pages: the fallback reads the same bytes.
    let file = std::fs::File::open(dir.path().join("f")).unwrap();
    file.sync_all().unwrap();
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(x.read(&l, 4096, 100_000).await.unwrap(), Bytes::copy_from_slice(&data[4096..104_096]));

    // Lookups: a cached negative entry is ENOENT; a file created behind
    // our back afterwards is found (and given an id once, then kept).
    assert_eq!(x.lookup(&root(), "later").await.unwrap_err(), FsError::ENOENT);
    assert_eq!(x.lookup(&root(), "later").await.unwrap_err(), FsError::ENOENT);
    std::fs::write(dir.path().join("later"), b"x").unwrap();
    let a = x.lookup(&root(), "later").await.unwrap();
    let h1 = p.posix().fast_path_hits();
    let b = x.lookup(&root(), "later").await.unwrap();
    assert_eq!(a.fid, b.fid);
    assert!(p.posix().fast_path_hits() > h1, "a warm lookup takes the fast path");
    assert_eq!(x.getattr(&path("later")).await.unwrap().fid, a.fid);
    // Renamed behind our back: the fid still finds it, the old path does not.
    std::fs::rename(dir.path().join("f"), dir.path().join("g")).unwrap();
    assert_eq!(x.getattr(&l).await.unwrap().size, 1 << 20);
    assert_eq!(x.getattr(&path("f")).await.unwrap_err(), FsError::ENOENT);
    // Replaced behind our back: a path with the old id is not the new file.
    std::fs::write(dir.path().join("f"), b"impostor").unwrap();
    assert_eq!(x.getattr(&at("g", f.fid)).await.unwrap().size, 1 << 20);
    let other = x.getattr(&path("f")).await.unwrap();
    assert_ne!(other.fid, f.fid);
    assert_eq!(x.lookup(&root(), ".imca").await.unwrap_err(), FsError::ENOENT);
}

/// fsync of a fifo answers at once: opening the fifo to sync it would block
/// a server thread until some writer came along.
#[tokio::test]
async fn fsync_of_a_fifo_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let p = posix::posix(dir.path(), 64).unwrap();
    let x: &dyn Translator = &*p;
    let f = nf("fifo");
    x.mknod(&root(), &f, libc::S_IFIFO | 0o644, 0).await.unwrap();
    let synced = tokio::time::timeout(std::time::Duration::from_secs(10), x.fsync(&at("fifo", f.fid), false)).await;
    assert_eq!(synced.expect("fsync of a fifo returned"), Ok(()));
    let d = nf("d");
    x.mkdir(&root(), &d).await.unwrap();
    assert_eq!(x.fsync(&at("d", d.fid), true).await, Ok(()));
}
