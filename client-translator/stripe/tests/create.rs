//! A striped create that fails on one server is undone on the others, open
//! count included: nothing of it is left holding space.

use stripe::Stripe;
use xlator::*;

fn nf(name: &str, id: u128) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(id), perm: 0o644, owner: Owner::default(), exclusive: true }
}

#[tokio::test]
async fn a_create_that_fails_on_one_server_leaves_nothing_open() {
    let (m0, m1) = (memory::memory(), memory::memory());
    let subvols: Vec<Next> = vec![m0.clone(), m1.clone()];
    let s = Stripe::new(subvols, stripe::DEFAULT_STRIPE_UNIT).unwrap();
    // Server 1 already has the name as a directory (servers disagree): its
    // create fails, and server 0's is rolled back.
    m1.mkdir(&Loc::root(), &nf("f", 1)).await.unwrap();
    let (before0, before1) = (m0.objects(), m1.objects());
    assert!(s.create(&Loc::root(), &nf("f", 2), libc::O_RDWR).await.is_err());
    assert_eq!(m0.objects(), before0, "server 0's file was removed and released, not kept as an open unlinked file");
    assert_eq!(m1.objects(), before1);

    // Non-exclusive: nothing is rolled back, but the opens are released.
    let (a0, a1) = (memory::memory(), memory::memory());
    let s = Stripe::new(vec![a0.clone() as Next, a1.clone() as Next], stripe::DEFAULT_STRIPE_UNIT).unwrap();
    a1.mkdir(&Loc::root(), &nf("g", 3)).await.unwrap();
    let g = NewFile { exclusive: false, ..nf("g", 4) };
    assert_eq!(s.create(&Loc::root(), &g, libc::O_RDWR).await.unwrap_err(), FsError::EISDIR);
    a0.unlink(&Loc::root(), "g").await.unwrap();
    assert_eq!(a0.objects(), 1, "only the root: the file was not held open by the failed create");
}
