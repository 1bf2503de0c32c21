//! Bounded resources and concurrency: the fd cache never holds more than
//! its bound, many clients and many calls in flight stay correct.

mod common;
use bytes::Bytes;
use common::*;
use std::sync::Arc;
use xlator::*;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fd_cache_is_bounded_and_evicted_files_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = common::args(dir.path());
    args.fd_cache = 16;
    let s = storage_server::start(args).await.unwrap();
    let c = protocol_client::connect(&s.addr.to_string(), common::opts()).await.unwrap();
    let before = open_fds();
    let mut files = Vec::new();
    for i in 0..300 {
        let f = nf(&format!("f{i}"));
        c.create(&root(), &f, 0).await.unwrap();
        c.write(&at(&f.name, f.fid), 0, Bytes::from(format!("content {i}"))).await.unwrap();
        files.push(f);
    }
    let after = open_fds();
    assert!(after <= before + 16 + 8, "fds grew from {before} to {after} with a cache of 16");
    // Every file, including the long-evicted ones, still reads back.
    for (i, f) in files.iter().enumerate() {
        let d = c.read(&at(&f.name, f.fid), 0, 100).await.unwrap();
        assert_eq!(d, Bytes::from(format!("content {i}")));
    }
    assert!(open_fds() <= before + 16 + 8);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_many_calls_in_flight() {
    let e = env().await;
    let addr = e.server.addr.to_string();
    let mut tasks = Vec::new();
    for client in 0..4 {
        let c = Arc::new(protocol_client::connect(&addr, common::opts()).await.unwrap());
        let f = nf(&format!("c{client}"));
        c.create(&root(), &f, 0).await.unwrap();
        for k in 0..64u64 {
            let (c, f) = (c.clone(), f.clone());
            tasks.push(tokio::spawn(async move {
                let l = at(&f.name, f.fid);
                let block: Vec<u8> = (0..8192).map(|i| ((i as u64 * 31 + k + client) % 251) as u8).collect();
                let w = c.write(&l, k * 8192, Bytes::from(block.clone())).await.unwrap();
                assert_eq!(w.written, 8192);
                let r = c.read(&l, k * 8192, 8192).await.unwrap();
                assert_eq!(&r[..], &block[..]);
                c.getattr(&l).await.unwrap();
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    for client in 0..4u64 {
        let data = std::fs::read(e.export.join(format!("c{client}"))).unwrap();
        assert_eq!(data.len(), 64 * 8192);
        for k in 0..64u64 {
            let want = ((k * 8192) as usize % 8192 * 31 + k as usize + client as usize) % 251;
            assert_eq!(data[(k * 8192) as usize] as usize, want);
        }
    }
}

#[tokio::test]
async fn files_follow_their_id_through_directory_renames() {
    let e = env().await;
    let c = &e.c;
    c.mkdir(&root(), &nf("a")).await.unwrap();
    c.mkdir(&path("a"), &nf("b")).await.unwrap();
    let f = nf("f");
    c.create(&path("a/b"), &f, 0).await.unwrap();
    // Another gateway renames a parent directory.
    c.rename(&root(), "a", &root(), "z", RenameFlags::default()).await.unwrap();
    let stale = at("a/b/f", f.fid);
    c.write(&stale, 0, Bytes::from_static(b"still here")).await.unwrap();
    assert_eq!(&c.read(&stale, 0, 100).await.unwrap()[..], b"still here");
    assert_eq!(c.getattr(&stale).await.unwrap().size, 10);
    c.setattr(&stale, &SetAttr { size: Some(5), ..Default::default() }).await.unwrap();
    c.setxattr(&stale, "user.k", b"v", XattrFlags::default()).await.unwrap();
    assert_eq!(std::fs::read(e.export.join("z/b/f")).unwrap(), b"still");
    // Without the id the old path is simply gone.
    assert_eq!(c.getattr(&path("a/b/f")).await.unwrap_err(), FsError::ENOENT);
}
