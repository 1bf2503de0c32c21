//! The lock table: range logic on its own ([`table`]), then the server's
//! side (waiting, leases) on tokio's paused clock.

use super::table::{FileLocks, Held, Holder};
use super::recovery::MARKER;
use super::*;
use std::sync::Arc;
use xlator::{LockKind, LOCK_TO_EOF};

const A: Holder = Holder { session: 1, owner: 10 };
const B: Holder = Holder { session: 2, owner: 10 };

fn lk(typ: LockType, start: u64, end: u64) -> Lock {
    Lock { kind: LockKind::Posix, typ, start, end, owner: 10, pid: 42 }
}

fn ranges(f: &FileLocks, h: Holder) -> Vec<(u64, u64, bool)> {
    let mut v: Vec<_> = f.held().iter().filter(|x| x.holder == h).map(|x| (x.start, x.end, x.write)).collect();
    v.sort();
    v
}

#[test]
fn own_locks_split_and_merge() {
    let mut f = FileLocks::default();
    f.set(A, &lk(LockType::Read, 0, 99));
    f.set(A, &lk(LockType::Write, 40, 59));
    assert_eq!(ranges(&f, A), vec![(0, 39, false), (40, 59, true), (60, 99, false)]);
    // Back to read: the three pieces merge into one.
    f.set(A, &lk(LockType::Read, 40, 59));
    assert_eq!(ranges(&f, A), vec![(0, 99, false)]);
    // Touching ranges of one type merge; of another type they do not.
    f.set(A, &lk(LockType::Read, 100, 199));
    f.set(A, &lk(LockType::Write, 200, 299));
    assert_eq!(ranges(&f, A), vec![(0, 199, false), (200, 299, true)]);
}

#[test]
fn unlock_of_a_sub_range_leaves_the_rest() {
    let mut f = FileLocks::default();
    f.set(A, &lk(LockType::Write, 0, LOCK_TO_EOF));
    f.set(A, &lk(LockType::Unlock, 10, 19));
    assert_eq!(ranges(&f, A), vec![(0, 9, true), (20, LOCK_TO_EOF, true)]);
    f.set(A, &lk(LockType::Unlock, 0, 9));
    assert_eq!(ranges(&f, A), vec![(20, LOCK_TO_EOF, true)]);
    // An unlock of what is not held changes nothing.
    f.set(A, &lk(LockType::Unlock, 0, 15));
    assert_eq!(ranges(&f, A), vec![(20, LOCK_TO_EOF, true)]);
    f.set(A, &lk(LockType::Unlock, 0, LOCK_TO_EOF));
    assert!(f.is_empty());
}

#[test]
fn other_owners_conflict_where_they_overlap_and_one_writes() {
    let mut f = FileLocks::default();
    f.set(A, &lk(LockType::Write, 40, 59));
    f.set(A, &lk(LockType::Read, 100, 199));
    let conflict = f.conflict(B, &lk(LockType::Read, 50, 50)).unwrap();
    assert_eq!((conflict.start, conflict.end, conflict.write, conflict.pid), (40, 59, true, 42));
    assert!(f.conflict(B, &lk(LockType::Read, 60, 99)).is_none(), "no overlap");
    assert!(f.conflict(B, &lk(LockType::Read, 150, 300)).is_none(), "read and read");
    assert!(f.conflict(B, &lk(LockType::Write, 150, 150)).is_some(), "write over read");
    assert!(f.conflict(B, &lk(LockType::Unlock, 0, LOCK_TO_EOF)).is_none());
    assert!(f.conflict(A, &lk(LockType::Write, 0, LOCK_TO_EOF)).is_none(), "own locks never conflict");
    // The same owner number of another gateway is another holder.
    assert_ne!(A, B);
    // POSIX and flock locks are separate families.
    let flock = Lock { kind: LockKind::Flock, ..lk(LockType::Write, 0, LOCK_TO_EOF) };
    assert!(f.conflict(B, &flock).is_none());
    f.set(B, &flock);
    assert!(f.conflict(A, &Lock { kind: LockKind::Flock, ..lk(LockType::Read, 0, LOCK_TO_EOF) }).is_some());
    // The gateways' append lock is a family of its own: an application's
    // whole-file locks never hold up an append, nor the other way round.
    let append = Lock { kind: LockKind::Append, ..lk(LockType::Write, 0, LOCK_TO_EOF) };
    assert!(f.conflict(A, &append).is_none() && f.conflict(B, &append).is_none());
    f.set(B, &append);
    assert!(f.conflict(A, &append).is_some(), "appends of two gateways take turns");
    assert!(f.conflict(A, &lk(LockType::Write, 1000, LOCK_TO_EOF)).is_none(), "nor an application's lock past the end");
    f.set(B, &Lock { typ: LockType::Unlock, ..append });
    assert!(f.conflict(A, &append).is_none());
}

#[test]
fn dropping_a_session_keeps_the_others() {
    let mut f = FileLocks::default();
    f.set(A, &lk(LockType::Read, 0, 9));
    f.set(Holder { session: 1, owner: 11 }, &lk(LockType::Read, 20, 29));
    f.set(B, &lk(LockType::Read, 0, 9));
    assert_eq!(f.drop_session(1), 2);
    assert_eq!(f.held(), &[Held { holder: B, kind: LockKind::Posix, write: false, start: 0, end: 9, pid: 42 }]);
}

#[test]
fn bad_ranges_are_refused() {
    assert_eq!(table::check(&lk(LockType::Read, 10, 9)), Err(FsError::EINVAL));
    assert_eq!(table::check(&lk(LockType::Read, 0, u64::MAX)), Err(FsError::EINVAL));
    assert_eq!(table::check(&lk(LockType::Read, 0, LOCK_TO_EOF)), Ok(()));
}

const LEASE: Duration = Duration::from_secs(1);

fn server() -> (Arc<LockTable>, Arc<Leases>) {
    let r = Registry::new();
    (Arc::new(LockTable::new(LEASE, &r)), Arc::new(Leases::new(LEASE, &r)))
}

fn file() -> Loc {
    Loc::new("f", Some(FileId(99)))
}

/// Sessions 1 and 2 poll (they hold leases) until the test ends.
fn keep_polling(cb: &Arc<Leases>, sessions: &[u64]) {
    for &s in sessions {
        let cb = cb.clone();
        tokio::spawn(async move {
            loop {
                let _ = cb.poll(s, u64::MAX).await;
            }
        });
    }
}

#[tokio::test(start_paused = true)]
async fn a_conflict_fails_or_waits_until_released() {
    let (locks, cb) = server();
    keep_polling(&cb, &[1, 2]);
    tokio::task::yield_now().await;
    locks.setlk(1, &file(), lk(LockType::Write, 0, 99), false, &cb).await.unwrap();
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Read, 50, 60), false, &cb).await, Err(FsError(libc::EAGAIN)));
    let got = locks.getlk(2, &file(), lk(LockType::Read, 50, 60), &cb).await.unwrap();
    assert_eq!((got.typ, got.start, got.end, got.pid), (LockType::Write, 0, 99, 42));
    assert_eq!(locks.getlk(2, &file(), lk(LockType::Read, 100, 200), &cb).await.unwrap().typ, LockType::Unlock);

    let waiter = {
        let (locks, cb) = (locks.clone(), cb.clone());
        tokio::spawn(async move { locks.setlk(2, &file(), lk(LockType::Write, 0, 0), true, &cb).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "held while the lock is");
    locks.setlk(1, &file(), lk(LockType::Unlock, 0, LOCK_TO_EOF), false, &cb).await.unwrap();
    assert_eq!(waiter.await.unwrap(), Ok(()));
    assert_eq!(locks.setlk(1, &file(), lk(LockType::Read, 0, 0), false, &cb).await, Err(FsError(libc::EAGAIN)));
}

#[tokio::test(start_paused = true)]
async fn a_held_request_is_told_to_ask_again_after_the_hold() {
    let (locks, cb) = server();
    keep_polling(&cb, &[1, 2]);
    tokio::task::yield_now().await;
    locks.setlk(1, &file(), lk(LockType::Write, 0, 0), false, &cb).await.unwrap();
    let started = Instant::now();
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Write, 0, 0), true, &cb).await, Err(FsError(libc::EAGAIN)));
    assert!(started.elapsed() >= HOLD);
    assert_eq!(locks.waiters.load(SeqCst), 0, "the waiter count is given back");
}

#[tokio::test(start_paused = true)]
async fn a_gateway_whose_lease_ran_out_loses_its_locks() {
    let (locks, cb) = server();
    keep_polling(&cb, &[2]);
    // Session 1 polls once, takes a lock, then stops polling (it died).
    cb.poll(1, 0).await.unwrap();
    locks.setlk(1, &file(), lk(LockType::Write, 0, 0), false, &cb).await.unwrap();
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Write, 0, 0), false, &cb).await, Err(FsError(libc::EAGAIN)));
    // A blocked waiter gets it once the lease is over.
    locks.setlk(2, &file(), lk(LockType::Write, 0, 0), true, &cb).await.unwrap();
    assert_eq!(locks.metrics.reclaimed.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn one_gateway_has_a_bounded_number_of_held_requests() {
    let (locks, cb) = server();
    keep_polling(&cb, &[1, 2]);
    tokio::task::yield_now().await;
    locks.setlk(1, &file(), lk(LockType::Write, 0, 0), false, &cb).await.unwrap();
    let held: Vec<_> = (0..MAX_WAITERS_PER_SESSION as u64)
        .map(|o| {
            let (locks, cb) = (locks.clone(), cb.clone());
            tokio::spawn(async move { locks.setlk(2, &file(), Lock { owner: o, ..lk(LockType::Write, 0, 0) }, true, &cb).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(locks.waiters.load(SeqCst), MAX_WAITERS_PER_SESSION);
    // One more of the same gateway is told to ask again at once.
    let started = Instant::now();
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Write, 0, 0), true, &cb).await, Err(FsError(libc::EAGAIN)));
    assert_eq!(started.elapsed(), Duration::ZERO);
    for h in held {
        assert_eq!(h.await.unwrap(), Err(FsError(libc::EAGAIN)));
    }
    assert!(locks.state.lock().unwrap().waiting.is_empty());
}

#[tokio::test(start_paused = true)]
async fn requests_without_a_session_or_file_id_are_refused() {
    let (locks, cb) = server();
    assert_eq!(locks.setlk(NO_SESSION, &file(), lk(LockType::Write, 0, 0), false, &cb).await, Err(FsError(libc::ENOLCK)));
    assert_eq!(locks.setlk(1, &Loc::new("f", None), lk(LockType::Write, 0, 0), false, &cb).await, Err(FsError::EINVAL));
}

#[tokio::test(start_paused = true)]
async fn one_file_holds_a_bounded_number_of_locks() {
    let (locks, cb) = server();
    keep_polling(&cb, &[1]);
    tokio::task::yield_now().await;
    // Every other byte: no two touch, so none merge.
    for i in 0..MAX_PER_FILE as u64 {
        locks.setlk(1, &file(), lk(LockType::Read, 2 * i, 2 * i), false, &cb).await.unwrap();
    }
    let next = lk(LockType::Read, 2 * MAX_PER_FILE as u64, 2 * MAX_PER_FILE as u64);
    assert_eq!(locks.setlk(1, &file(), next, false, &cb).await, Err(FsError(libc::ENOLCK)));
    // Unlocking everything always works and empties the table.
    locks.setlk(1, &file(), lk(LockType::Unlock, 0, LOCK_TO_EOF), false, &cb).await.unwrap();
    assert_eq!(locks.state.lock().unwrap().total, 0);
    assert!(locks.state.lock().unwrap().files.is_empty());
}

const GRACE: Duration = Duration::from_secs(5);

/// A server whose marker lives in `dir` (restarted: one more call).
fn restarted(dir: &std::path::Path) -> Arc<LockTable> {
    Arc::new(LockTable::with_recovery(LEASE, dir.join(MARKER), GRACE, &Registry::new()))
}

#[tokio::test(start_paused = true)]
async fn a_first_start_has_no_grace_and_the_marker_follows_the_locks() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cb) = server();
    keep_polling(&cb, &[1]);
    tokio::task::yield_now().await;
    let locks = restarted(dir.path());
    assert!(!locks.in_grace(), "no marker: nothing to reclaim");
    locks.setlk(1, &file(), lk(LockType::Write, 0, 9), false, &cb).await.unwrap();
    assert!(dir.path().join(MARKER).exists(), "written before the first lock is granted");
    // A restart now would wait for reclaims.
    assert!(restarted(dir.path()).in_grace());
    locks.setlk(1, &file(), lk(LockType::Unlock, 0, LOCK_TO_EOF), false, &cb).await.unwrap();
    locks.tidy();
    assert!(dir.path().join(MARKER).exists(), "kept a lease after the last unlock");
    tokio::time::sleep(LEASE).await;
    locks.tidy();
    assert!(!dir.path().join(MARKER).exists(), "gone once no lock was held for a lease");
    assert!(!restarted(dir.path()).in_grace());
    // The gateways' append locks never need a reclaim.
    let append = Lock { kind: LockKind::Append, ..lk(LockType::Write, 0, LOCK_TO_EOF) };
    locks.setlk(1, &file(), append, false, &cb).await.unwrap();
    assert!(!dir.path().join(MARKER).exists());
}

#[tokio::test(start_paused = true)]
async fn during_the_grace_only_reclaims_take_locks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(MARKER), b"").unwrap();
    let (_, cb) = server();
    keep_polling(&cb, &[1, 2]);
    tokio::task::yield_now().await;
    let locks = restarted(dir.path());
    let started = Instant::now();
    assert!(locks.in_grace());
    assert_eq!(locks.metrics.grace.get(), 1);
    // A new lock, even on a free range, could collide with one not reclaimed yet.
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Read, 100, 199), false, &cb).await, Err(FsError(libc::EAGAIN)));
    // Unlocks and the gateways' append locks go through.
    locks.setlk(2, &file(), lk(LockType::Unlock, 0, LOCK_TO_EOF), false, &cb).await.unwrap();
    let append = Lock { kind: LockKind::Append, ..lk(LockType::Write, 0, LOCK_TO_EOF) };
    locks.setlk(2, &file(), append, false, &cb).await.unwrap();
    // Gateway 1 reclaims what its owner held; gateway 2 cannot reclaim over it.
    locks.reclaim(1, &file(), lk(LockType::Write, 0, 9), &cb).unwrap();
    assert_eq!(locks.reclaim(2, &file(), lk(LockType::Read, 5, 5), &cb), Err(FsError(libc::ENOLCK)));
    locks.reclaim(1, &file(), lk(LockType::Write, 0, 9), &cb).unwrap(); // sent twice: still held
    assert_eq!(locks.reclaim(1, &file(), lk(LockType::Unlock, 0, 9), &cb), Err(FsError::EINVAL));
    // A blocking request for a free range waits for the end of the grace.
    let waiter = {
        let (locks, cb) = (locks.clone(), cb.clone());
        tokio::spawn(async move { locks.setlk(2, &file(), lk(LockType::Write, 50, 59), true, &cb).await })
    };
    // F_GETLK waits for the grace too (its answer might miss a lock not reclaimed yet).
    assert_eq!(locks.getlk(2, &file(), lk(LockType::Read, 0, 0), &cb).await, Err(FsError(libc::EAGAIN)));
    assert_eq!(started.elapsed(), HOLD);
    assert!(!waiter.is_finished());
    let got = locks.getlk(2, &file(), lk(LockType::Read, 0, 0), &cb).await.unwrap();
    assert_eq!(started.elapsed(), GRACE);
    assert_eq!((got.typ, got.start, got.end), (LockType::Write, 0, 9), "the reclaimed lock holds");
    // (its hold ran out during the grace: asked again, as the gateway does)
    assert_eq!(waiter.await.unwrap(), Err(FsError(libc::EAGAIN)));
    locks.setlk(2, &file(), lk(LockType::Write, 50, 59), true, &cb).await.unwrap();
    assert_eq!(locks.setlk(2, &file(), lk(LockType::Write, 0, 0), false, &cb).await, Err(FsError(libc::EAGAIN)));
    locks.tidy();
    assert_eq!(locks.metrics.grace.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn after_the_grace_a_reclaim_is_refused_unless_still_held() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(MARKER), b"").unwrap();
    let (_, cb) = server();
    keep_polling(&cb, &[1, 2]);
    tokio::task::yield_now().await;
    let locks = restarted(dir.path());
    locks.reclaim(1, &file(), lk(LockType::Read, 0, 99), &cb).unwrap();
    tokio::time::sleep(GRACE).await;
    // Late: someone may have the range by now; the gateway reports it lost.
    assert_eq!(locks.reclaim(2, &file(), lk(LockType::Read, 0, 9), &cb), Err(FsError(libc::ENOLCK)));
    assert_eq!(locks.reclaim(1, &file(), lk(LockType::Write, 0, 9), &cb), Err(FsError(libc::ENOLCK)), "held as read, not write");
    // What it holds (a part of it too) is confirmed: a server that did not restart.
    locks.reclaim(1, &file(), lk(LockType::Read, 10, 19), &cb).unwrap();
    let count = |o: &str| locks.metrics.reclaims.with_label_values(&[o]).get();
    assert_eq!((count("granted"), count("late"), count("held")), (1, 2, 1));
}
