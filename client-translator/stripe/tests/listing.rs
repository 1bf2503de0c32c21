//! A listing with attributes over several servers (stripe's `plus`): a
//! file's attributes are every copy's merged, fetched from the servers that
//! did not list it with one `getattrs` each, or a getattr per file from a
//! server that has no `getattrs`.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use stripe::Stripe;
use xlator::*;

const UNIT: u64 = stripe::DEFAULT_STRIPE_UNIT;

/// A server that counts its getattr-like calls, and can lack `getattrs`.
struct Counting {
    below: Next,
    getattrs: bool,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl Translator for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }
    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        self.calls.fetch_add(1, SeqCst);
        self.below.getattr(loc).await
    }
    async fn getattrs(&self, locs: &[Loc]) -> FsResult<Vec<Option<Attr>>> {
        self.calls.fetch_add(1, SeqCst);
        if !self.getattrs {
            return Err(FsError::ENOSYS);
        }
        self.below.getattrs(locs).await
    }
}

async fn listing_with(getattrs: bool) -> (Vec<(String, u64)>, usize) {
    let follower = Arc::new(Counting { below: memory::memory(), getattrs, calls: AtomicUsize::new(0) });
    let s = Stripe::new(vec![memory::memory(), follower.clone() as Next], UNIT).unwrap();
    let root = Loc::root();
    for i in 0..40u64 {
        let new = NewFile { name: format!("f{i:02}"), fid: FileId::from_random(u128::from(i) + 1), perm: 0o644, owner: Owner::default(), exclusive: true };
        let a = s.create(&root, &new, libc::O_RDWR).await.unwrap().attr;
        // sizes reaching into the follower's stripe unit for some
        let at = Loc { path: format!("f{i:02}"), fid: Some(a.fid) };
        s.write(&at, 0, bytes::Bytes::from(vec![7u8; (i * UNIT / 10) as usize + 1])).await.unwrap();
    }
    s.mkdir(&root, &NewFile { name: "d".into(), fid: FileId::from_random(999), perm: 0o755, owner: Owner::default(), exclusive: true })
        .await
        .unwrap();
    follower.calls.store(0, SeqCst);
    let page = s.readdir(&root, 0, 256, true).await.unwrap();
    let calls = follower.calls.load(SeqCst);
    let mut got: Vec<(String, u64)> = page.iter().map(|e| (e.name.clone(), e.attr.as_ref().expect("attributes").size)).collect();
    got.sort();
    // what a getattr through the stripe (every copy merged) says
    for (name, size) in &got {
        let fid = page.iter().find(|e| &e.name == name).unwrap().fid;
        if name != "d" {
            assert_eq!(*size, s.getattr(&Loc { path: name.clone(), fid: Some(fid) }).await.unwrap().size, "{name}");
        }
    }
    (got, calls)
}

#[tokio::test]
async fn one_getattrs_per_server_fills_a_listing() {
    let (got, calls) = listing_with(true).await;
    assert_eq!(got.len(), 41);
    assert_eq!(got[40], ("f39".to_string(), 39 * UNIT / 10 + 1), "a size only the copies together give (\"d\" sorts first)");
    assert_eq!(calls, 1, "the follower was asked once for the whole batch");
}

#[tokio::test]
async fn a_server_without_getattrs_is_asked_file_by_file() {
    let (with, _) = listing_with(true).await;
    let (without, calls) = listing_with(false).await;
    assert_eq!(with, without);
    assert_eq!(calls, 1 + 40, "one refused getattrs, then a getattr per file");
}
