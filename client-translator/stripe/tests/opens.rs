//! Opens over several servers: an open that one server refused is an
//! error, and the servers that counted it let go of it at once (the
//! gateway sends no release for a failed open, and a server's open count
//! keeps a removed file's space). The same for a create, which counts an
//! open wherever it succeeds: one a follower refused, and one server 0
//! answered only after stripe had given up on it.

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
    let a = s.create(&Loc::root(), &new, libc::O_RDWR).await.unwrap().attr;
    s.release(&Loc { path: "f".into(), fid: Some(a.fid) }).await.unwrap();
    let before = good.releases.load(SeqCst);
    assert_eq!(s.open(&Loc { path: "f".into(), fid: Some(a.fid) }, libc::O_RDONLY).await, Err(FsError::EIO));
    assert_eq!(good.releases.load(SeqCst), before + 1, "the server that counted the open let go of it");
    assert_eq!(bad.releases.load(SeqCst), 1, "nothing to release where it failed (only the create's)");
}

/// A server that counts the opens it holds (creates and opens that
/// succeeded, less releases), as a storage server's open count does; its
/// creates can be refused, or held until the test lets them through.
struct Counting {
    below: Next,
    refuse_creates: std::sync::atomic::AtomicBool,
    gate: Option<Arc<tokio::sync::Semaphore>>,
    held: std::sync::atomic::AtomicIsize,
    released: tokio::sync::Notify,
}

fn counting(gate: Option<Arc<tokio::sync::Semaphore>>) -> Arc<Counting> {
    Arc::new(Counting {
        below: memory::memory(),
        refuse_creates: false.into(),
        gate,
        held: 0.into(),
        released: tokio::sync::Notify::new(),
    })
}

impl Counting {
    fn held(&self) -> isize {
        self.held.load(SeqCst)
    }
}

#[async_trait::async_trait]
impl Translator for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        if let Some(g) = &self.gate {
            let _pass = g.acquire().await.map_err(|_| FsError::EIO)?;
        }
        if self.refuse_creates.load(SeqCst) {
            return Err(FsError::EIO);
        }
        let m = self.below.create(parent, new, flags).await?;
        self.held.fetch_add(1, SeqCst);
        Ok(m)
    }
    async fn open(&self, loc: &Loc, flags: i32) -> FsResult<()> {
        self.below.open(loc, flags).await?;
        self.held.fetch_add(1, SeqCst);
        Ok(())
    }
    async fn release(&self, loc: &Loc) -> FsResult<()> {
        self.held.fetch_sub(1, SeqCst);
        self.released.notify_one();
        self.below.release(loc).await
    }
}

fn two(s0: &Arc<Counting>, s1: &Arc<Counting>) -> Stripe {
    Stripe::new(vec![s0.clone() as Next, s1.clone() as Next], UNIT).unwrap()
}

/// A create that server 0 made and a follower refused holds no open
/// anywhere: exclusive, it is undone (a retry starts from a clean slate);
/// without O_EXCL the file stays, as server 0 decided, and the next lookup
/// gives the follower its copy.
#[tokio::test]
async fn a_create_a_follower_refused_holds_no_open() {
    for exclusive in [true, false] {
        let (s0, s1) = (counting(None), counting(None));
        let s = two(&s0, &s1);
        s1.refuse_creates.store(true, SeqCst);
        let new = NewFile { name: "f".into(), fid: FileId::from_random(9), perm: 0o644, owner: Owner::default(), exclusive };
        assert_eq!(s.create(&Loc::root(), &new, libc::O_RDWR).await, Err(FsError::EIO));
        assert_eq!((s0.held(), s1.held()), (0, 0), "exclusive {exclusive}: server 0's open was released");
        let on0 = s0.below.lookup(&Loc::root(), "f").await;
        if exclusive {
            assert_eq!(on0, Err(FsError::ENOENT), "undone on server 0");
        } else {
            assert_eq!(on0.map(|a| a.fid), Ok(new.fid), "left on server 0");
            s1.refuse_creates.store(false, SeqCst);
            assert_eq!(s.lookup(&Loc::root(), "f").await.map(|a| a.fid), Ok(new.fid));
            assert_eq!(s1.below.lookup(&Loc::root(), "f").await.map(|a| a.fid), Ok(new.fid), "healed onto the follower");
            assert_eq!((s0.held(), s1.held()), (0, 0), "the heal's create holds no open either");
        }
    }
}

/// A create server 0 answers only after stripe gave up on it (EIO after
/// `IN_FLIGHT`) counted an open there that no gateway will release: stripe
/// releases it when the answer comes.
#[tokio::test(start_paused = true)]
async fn a_create_server_0_answers_too_late_is_released_there() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (s0, s1) = (counting(Some(gate.clone())), counting(None));
    let s = two(&s0, &s1);
    let new = NewFile { name: "f".into(), fid: FileId::from_random(9), perm: 0o644, owner: Owner::default(), exclusive: true };
    // (paused time: the wait for server 0 runs out at once)
    assert_eq!(s.create(&Loc::root(), &new, libc::O_RDWR).await, Err(FsError::EIO));
    assert_eq!(s1.held(), 0, "the follower's copy was released");
    gate.add_permits(1);
    let late = tokio::time::timeout(stripe::IN_FLIGHT * 6, s0.released.notified()).await;
    assert!(late.is_ok(), "server 0's late create was released");
    assert_eq!(s0.held(), 0);
}
