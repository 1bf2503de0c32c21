//! Opens over several servers: an open that one server refused is an
//! error, and the servers that counted it let go of it at once (the
//! gateway sends no release for a failed open, and a server's open count
//! keeps a removed file's space).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use stripe::Stripe;
use xlator::*;

const UNIT: u64 = stripe::DEFAULT_STRIPE_UNIT;

/// A server whose opens fail, counting what reaches it.
struct Refusing {
    below: Next,
    refuse: bool,
    releases: AtomicUsize,
}

#[async_trait::async_trait]
impl Translator for Refusing {
    fn name(&self) -> &str {
        "refusing"
    }
    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        if self.refuse {
            return Err(FsError::EIO);
        }
        self.below.open(loc, flags).await
    }
    async fn release(&self, loc: &Loc) -> FsResult<()> {
        self.releases.fetch_add(1, SeqCst);
        self.below.release(loc).await
    }
}

/// An open that failed on one server is released on those that counted it
/// (the gateway sends no release for a failed open).
#[tokio::test]
async fn an_open_that_failed_somewhere_is_released_where_it_succeeded() {
    let good = Arc::new(Refusing { below: memory::memory(), refuse: false, releases: AtomicUsize::new(0) });
    let bad = Arc::new(Refusing { below: memory::memory(), refuse: true, releases: AtomicUsize::new(0) });
    let s = Stripe::new(vec![good.clone() as Next, bad.clone() as Next], UNIT).unwrap();
    let new = NewFile { name: "f".into(), fid: FileId::from_random(7), perm: 0o644, owner: Owner::default(), exclusive: true };
    let a = s.create(&Loc::root(), &new, libc::O_RDWR).await.unwrap();
    s.release(&Loc { path: "f".into(), fid: Some(a.fid) }).await.unwrap();
    let before = good.releases.load(SeqCst);
    assert_eq!(s.open(&Loc { path: "f".into(), fid: Some(a.fid) }, libc::O_RDONLY).await, Err(FsError::EIO));
    assert_eq!(good.releases.load(SeqCst), before + 1, "the server that counted the open let go of it");
    assert_eq!(bad.releases.load(SeqCst), 1, "nothing to release where it failed (only the create's)");
}
