//! The coherence promise on the smallest stack that has it: whatever one
//! gateway changed, no gateway answers from before the change. The leaf is
//! the oracle (it is the disk), so every attribute must match exactly.

use crate::support::{pattern, Spec, Stack};
use async_trait::async_trait;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use testkit::{new_file, TestBank};
use xlator::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Default)]
struct Reads {
    asked: u64,
    /// reads that reached the disk
    missed: u64,
}

/// Gateway `g` agrees with the disk about `name`: lookup, getattr, the
/// whole file, one random range.
async fn check(s: &Stack, g: usize, name: &str, rng: &mut StdRng, ctx: &str, reads: &mut Reads) {
    let gw = &s.gateways[g];
    let want = s.disk().lookup(&Loc::root(), name).await;
    assert_eq!(gw.lookup(&Loc::root(), name).await, want, "{ctx}: gateway {g} lookup {name}");
    let Ok(a) = want else { return };
    let loc = Loc::new(name, Some(a.fid));
    assert_eq!(gw.getattr(&loc).await.unwrap(), a, "{ctx}: gateway {g} getattr {name}");
    let (off, len) = (rng.random_range(0..a.size + 5000), rng.random_range(1..20_000));
    for (off, len, what) in [(0, a.size as u32 + 100, "whole"), (off, len, "range")] {
        let want = s.disk().read(&loc, off, len).await.unwrap();
        let before = s.calls(Fop::Read);
        assert_eq!(gw.read(&loc, off, len).await.unwrap(), want, "{ctx}: gateway {g} read {name} {what} [{off}, +{len})");
        reads.asked += 1;
        reads.missed += s.calls(Fop::Read) - before;
    }
}

/// One random mutation through gateway `g`; the names it touched.
async fn mutate(s: &Stack, g: usize, rng: &mut StdRng) -> Vec<&'static str> {
    let gw = &s.gateways[g];
    let name = NAMES[rng.random_range(0..NAMES.len())];
    let Ok(a) = gw.lookup(&Loc::root(), name).await else {
        gw.create(&Loc::root(), &new_file(name), libc::O_RDWR | libc::O_CREAT).await.unwrap();
        return vec![name];
    };
    let loc = Loc::new(name, Some(a.fid));
    match rng.random_range(0..10) {
        0..=3 => {
            let (off, len) = (rng.random_range(0..40_000u64), rng.random_range(1..12_000usize));
            gw.write(&loc, off, pattern(len, rng.random())).await.unwrap();
        }
        4 => {
            let size = rng.random_range(0..40_000u64);
            gw.setattr(&loc, &SetAttr { size: Some(size), ..Default::default() }).await.unwrap();
        }
        5 => {
            let perm = [0o600, 0o644, 0o755][rng.random_range(0..3)];
            gw.setattr(&loc, &SetAttr { perm: Some(perm), ..Default::default() }).await.unwrap();
        }
        6 => {
            gw.unlink(&Loc::root(), name).await.unwrap();
        }
        7 => {
            let to = NAMES[rng.random_range(0..NAMES.len())];
            if to != name {
                gw.rename(&Loc::root(), name, &Loc::root(), to, RenameFlags::default()).await.unwrap();
                return vec![name, to];
            }
        }
        8 => {
            let to = NAMES[rng.random_range(0..NAMES.len())];
            if gw.link(&loc, &Loc::root(), to).await.is_ok() {
                return vec![name, to];
            }
        }
        _ => {
            // append
            let a = gw.getattr(&loc).await.unwrap();
            gw.write(&loc, a.size, pattern(rng.random_range(1..3000), rng.random())).await.unwrap();
        }
    }
    vec![name]
}

#[tokio::test]
async fn mutations_through_one_gateway_are_never_read_stale_through_another() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    let mut rng = StdRng::seed_from_u64(0xc0ec_0001);
    let mut reads = Reads::default();
    for i in 0..200 {
        let g = rng.random_range(0..2);
        for name in mutate(&s, g, &mut rng).await {
            for gw in [1 - g, g] {
                check(&s, gw, name, &mut rng, &format!("op {i}"), &mut reads).await;
            }
        }
    }
    // the promise is cheap to keep if nothing is cached: make sure plenty was
    assert!(reads.missed * 2 < reads.asked, "the bank answered too few reads: {} of {} missed", reads.missed, reads.asked);
}

/// Between CMCache and the storage server: runs `hook` once, right after
/// the server answered a getattr or lookup (so the answer CMCache is about
/// to store is already out of date).
struct Meddle {
    below: Next,
    armed: AtomicBool,
    hook: Hook,
}

/// What a `Meddle` does to the storage server (it is handed SMCache).
type Hook = Box<dyn Fn(Next) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

impl Meddle {
    async fn after(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            (self.hook)(self.below.clone()).await;
        }
    }
}

#[async_trait]
impl Translator for Meddle {
    fn name(&self) -> &str {
        "meddle"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    async fn getattr(&self, loc: &Loc) -> FsResult<Attr> {
        let a = self.below.getattr(loc).await;
        self.after().await;
        a
    }

    async fn lookup(&self, parent: &Loc, name: &str) -> FsResult<Attr> {
        let a = self.below.lookup(parent, name).await;
        self.after().await;
        a
    }
}

/// A stack whose storage server is wrapped by a `Meddle` running `hook`.
async fn meddled(hook: Hook) -> (Stack, Arc<Meddle>) {
    let bank = TestBank::start(2).await;
    let config = bank.config(4096);
    let mut m = None;
    let s = Stack::over(bank, config, Spec::default(), |sm| {
        let x = Arc::new(Meddle { below: sm, armed: AtomicBool::new(false), hook });
        m = Some(x.clone());
        x
    });
    (s, m.unwrap())
}

/// CMCache populates a stat by claiming the key, asking the server, and
/// storing the answer only if the claim still holds. A mutation between
/// the question and the store deletes the key, breaking the claim: the
/// out-of-date answer is given once (it was true when asked) and never
/// stored.
#[tokio::test]
async fn a_stat_read_before_a_mutation_is_never_stored_after_it() {
    let (s, m) = meddled(Box::new(|sm| {
        Box::pin(async move {
            let chmod = SetAttr { perm: Some(0o600), ..Default::default() };
            sm.setattr(&Loc::new("f", None), &chmod).await.unwrap();
        })
    }))
    .await;
    let f = s.file("f", b"x").await;
    m.armed.store(true, Ordering::SeqCst);
    let old = s.gw().getattr(&f).await.unwrap();
    assert_eq!(old.perm, 0o644, "the answer from before the chmod");
    assert_eq!(s.gw().getattr(&f).await.unwrap().perm, 0o600, "the bank did not keep it");
    assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap().perm, 0o600);
}

#[tokio::test]
async fn an_entry_read_before_an_unlink_is_never_stored_after_it() {
    let (s, m) = meddled(Box::new(|sm| {
        Box::pin(async move {
            sm.unlink(&Loc::root(), "f").await.unwrap();
        })
    }))
    .await;
    let f = s.file("f", b"x").await;
    m.armed.store(true, Ordering::SeqCst);
    assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap().fid, f.fid.unwrap(), "found before the unlink");
    assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap_err(), FsError::ENOENT, "the bank did not keep it");
}
