//! The coherence translator in a graph over a real leaf (the in-memory
//! tree): what a change through it, and a callback travelling up to it,
//! do to what it remembers.

use coherence::{Coherence, Mode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlator::*;

fn new_file(name: &str, fid: u128) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(fid), perm: 0o644, owner: Owner::default(), exclusive: true }
}

/// A coherence translator over a memory leaf, with a lease from its one server.
async fn graph() -> (Arc<Coherence>, Next) {
    let co = Arc::new(Coherence::new(memory::memory(), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let lease = Upcall { server: 0, lease_until: Some(Instant::now() + Duration::from_secs(60)), ..Upcall::default() };
    top.upcall(&lease).await;
    (co, top)
}

#[tokio::test]
async fn a_callback_that_travels_up_drops_what_it_names() {
    let (co, top) = graph().await;
    let f = top.create(&Loc::root(), &new_file("f", 7), libc::O_RDWR).await.unwrap().attr;
    let ino = f.fid.ino();
    assert_eq!(co.kernel().memo_attr(ino).map(|(a, _)| a), Some(f.clone()), "a create here is remembered");
    let callback = Upcall { server: 0, items: vec![Invalidation::attrs(f.fid)], seq: 1, ..Upcall::default() };
    top.upcall(&callback).await;
    assert!(co.kernel().memo_attr(ino).is_none(), "called back: its attributes go");
}

#[tokio::test]
async fn a_change_here_leaves_its_answer_and_a_rename_forgets_everything() {
    let (co, top) = graph().await;
    let f = top.create(&Loc::root(), &new_file("f", 8), libc::O_RDWR).await.unwrap().attr;
    let (loc, ino) = (Loc::new("f", Some(f.fid)), f.fid.ino());
    let set = SetAttr { size: Some(5), ..SetAttr::default() };
    let after = top.setattr(&loc, &set).await.unwrap();
    assert_eq!(after.size, 5);
    assert_eq!(co.kernel().memo_attr(ino).map(|(a, _)| a.size), Some(5), "the setattr's answer replaced what was remembered");
    top.rename(&Loc::root(), "f", &Loc::root(), "g", RenameFlags::default()).await.unwrap();
    assert!(co.kernel().memo_attr(ino).is_none(), "a name moved here: everything goes");
}

#[tokio::test]
async fn a_lease_not_renewed_serves_nothing() {
    let co = Arc::new(Coherence::new(memory::memory(), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let f = top.create(&Loc::root(), &new_file("f", 9), libc::O_RDWR).await.unwrap().attr;
    assert!(co.kernel().memo_attr(f.fid.ino()).is_none(), "no lease: the memo does not answer");
    assert_eq!(co.kernel().ttl(co.kernel().ticket(), &[f.fid.ino()]), Duration::ZERO);
}
