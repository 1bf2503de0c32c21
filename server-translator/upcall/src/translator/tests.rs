//! What each mutation calls back, through the translator over a memory
//! leaf: gateway 1 mutates, gateway 2 (which holds nothing, so nobody
//! waits) finds the invalidations at its next poll.

use super::*;
use bytes::Bytes;
use prometheus::Registry;
use std::time::Duration;
use wire::{Invalidation, Reply};

/// The other gateway: polls the lease table and acknowledges what it got.
struct Other {
    leases: Arc<Leases>,
    acked: u64,
}

impl Other {
    async fn start(leases: &Arc<Leases>) -> Other {
        leases.poll(2, 0).await.unwrap();
        Other { leases: leases.clone(), acked: 0 }
    }

    /// What it was sent since its last poll.
    async fn sent(&mut self) -> Vec<Invalidation> {
        match self.leases.poll(2, self.acked).await.unwrap() {
            Reply::Callbacks { seq, items, .. } => {
                self.acked = seq;
                items
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A file id of the shape gateways draw (the memory leaf checks it).
fn id(n: u128) -> FileId {
    FileId::from_random(n)
}

fn new(name: &str, fid: FileId) -> NewFile {
    NewFile { name: name.into(), fid, perm: 0o644, owner: Default::default(), exclusive: true }
}

#[tokio::test(start_paused = true)]
async fn what_each_mutation_calls_back() {
    let leases = Arc::new(Leases::new(Duration::from_secs(1), &Registry::new()));
    let up = Upcall::new(Arc::new(memory::Memory::new()), leases.clone());
    let mut other = Other::start(&leases).await;
    let root = Loc::root();
    let (r, d, f) = (FileId::ROOT, id(2), id(5));

    // A new name: the directory's attributes only (no entry: see `Stale::new_name`).
    session::scope(1, up.mkdir(&root, &new("d", d))).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::attrs(r)]);
    let dir = Loc::new("d", Some(d));
    session::scope(1, up.create(&dir, &new("x", f), libc::O_RDWR | libc::O_CREAT)).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::attrs(d)]);
    let x = Loc::new("d/x", Some(f));

    session::scope(1, up.write(&x, 8192, Bytes::from_static(&[1; 100]))).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::data(f, 8192, 100)]);

    let truncate = SetAttr { size: Some(5000), ..Default::default() };
    session::scope(1, up.setattr(&x, &truncate)).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::data(f, 4096, 0)]);
    let chmod = SetAttr { perm: Some(0o600), ..Default::default() };
    session::scope(1, up.setattr(&x, &chmod)).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::attrs(f)]);

    // Open is a data mutation only with O_TRUNC.
    session::scope(1, up.open(&x, libc::O_RDWR)).await.unwrap();
    session::scope(1, up.open(&x, libc::O_RDWR | libc::O_TRUNC)).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::data(f, 0, 0)]);

    session::scope(1, up.unlink(&dir, "x")).await.unwrap();
    assert_eq!(other.sent().await, vec![Invalidation::entry(d, "x"), Invalidation::attrs(d), Invalidation::attrs(f)]);

    // A read changes nothing; the asker itself is not called back.
    session::scope(1, up.readdir(&dir, 0, 10, false)).await.unwrap();
    session::scope(2, up.mkdir(&dir, &new("y", id(6)))).await.unwrap();
    assert_eq!(other.sent().await, vec![]);
}

#[tokio::test(start_paused = true)]
async fn the_maker_of_a_new_object_holds_it_from_the_start() {
    let leases = Arc::new(Leases::new(Duration::from_secs(1), &Registry::new()));
    let up = Upcall::new(Arc::new(memory::Memory::new()), leases.clone());
    leases.poll(1, 0).await.unwrap();
    session::scope(1, up.mkdir(&Loc::root(), &new("d", id(2)))).await.unwrap();
    // A change of it now waits for gateway 1 (its poll is answered at once).
    let writer = tokio::spawn({
        let leases = leases.clone();
        async move { leases.invalidate(3, &[Invalidation::attrs(id(2))]).await }
    });
    tokio::task::yield_now().await;
    assert!(!writer.is_finished(), "waits for the gateway that made it");
    let Reply::Callbacks { seq, .. } = leases.poll(1, 0).await.unwrap() else { panic!() };
    leases.poll(1, seq).await.unwrap();
    writer.await.unwrap();
}
