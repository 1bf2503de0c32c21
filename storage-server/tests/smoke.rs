//! The first end-to-end check: protocol-client -> TCP -> protocol-server -> posix.

mod common;
use bytes::Bytes;
use common::*;
use xlator::*;

#[tokio::test]
async fn create_write_read_stat_list_remove() {
    let e = env().await;
    let c = &e.c;
    assert!(c.epoch() >= 1, "the epoch is learned from replies");
    let new = nf("hello.txt");
    let a = c.create(&root(), &new, libc::O_RDWR).await.unwrap().attr;
    assert_eq!(a.fid, new.fid);
    assert_eq!(a.kind, FileKind::File);
    assert_eq!(a.nlink, 1);
    assert_eq!(a.perm, 0o644);
    let loc = at("hello.txt", new.fid);
    let w = c.write(&loc, 0, Bytes::from_static(b"hello world")).await.unwrap();
    assert_eq!(w.written, 11);
    assert_eq!(w.attr.unwrap().size, 11);
    assert_eq!(&c.read(&loc, 6, 100).await.unwrap()[..], b"world");
    assert_eq!(std::fs::read(e.export.join("hello.txt")).unwrap(), b"hello world");
    let l = c.lookup(&root(), "hello.txt").await.unwrap();
    assert_eq!(l.fid, new.fid);
    assert_eq!(l.size, 11);
    let ents = c.readdir(&root(), 0, 100, true).await.unwrap();
    assert_eq!(ents.len(), 1, "{ents:?}");
    assert_eq!(ents[0].name, "hello.txt");
    assert_eq!(ents[0].attr.as_ref().unwrap().size, 11);
    assert_eq!(c.lookup(&root(), ".imca").await.unwrap_err(), FsError::ENOENT);
    let r = c.unlink(&root(), "hello.txt").await.unwrap();
    assert_eq!(r.fid, new.fid);
    assert!(r.remaining.is_none());
    c.release(&loc).await.unwrap();
    common::gone_by_id(c, &loc).await;
    assert_eq!(c.lookup(&root(), "hello.txt").await.unwrap_err(), FsError::ENOENT);
    e.server.shutdown().await;
}
