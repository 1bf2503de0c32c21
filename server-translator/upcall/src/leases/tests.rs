//! The lease table on its own: who is waited for, for how long, and what
//! bounds hold. Time is tokio's paused clock, so leases run out instantly.

use super::*;
use xlator::FileId;

const LEASE: Duration = Duration::from_secs(1);

fn table() -> Arc<Leases> {
    Arc::new(Leases::new(LEASE, &Registry::new()))
}

fn items(r: Reply) -> (u64, bool, Vec<Invalidation>) {
    let (lease_ms, seq, fresh, items) = answer(r);
    assert_eq!(lease_ms, 1000, "renewed");
    (seq, fresh, items)
}

fn answer(r: Reply) -> (u32, u64, bool, Vec<Invalidation>) {
    match r {
        Reply::Callbacks { seq, fresh, items, lease_ms } => (lease_ms, seq, fresh, items),
        other => panic!("{other:?}"),
    }
}

fn one() -> Vec<Invalidation> {
    vec![Invalidation::attrs(FileId(7))]
}

/// Gateway `id` starts its session here and holds `fids`.
async fn holding(t: &Leases, id: u64, fids: &[u128]) {
    items(t.poll(id, 0).await.unwrap());
    let inos: Vec<u64> = fids.iter().map(|f| FileId(*f).ino()).collect();
    assert!(matches!(t.hold(id, &inos), Ok(Reply::Held { everything: false, .. })));
}

#[tokio::test(start_paused = true)]
async fn a_new_session_is_told_it_is_fresh_and_a_quiet_poll_is_held() {
    let t = table();
    assert_eq!(items(t.poll(5, 0).await.unwrap()), (0, true, vec![]));
    let started = Instant::now();
    assert_eq!(items(t.poll(5, 0).await.unwrap()), (0, false, vec![]));
    assert_eq!(started.elapsed(), LEASE / 4, "held for a quarter lease");
    assert_eq!(t.poll(NO_SESSION, 0).await, Err(FsError::EINVAL));
}

#[tokio::test(start_paused = true)]
async fn a_mutation_waits_until_the_other_gateway_acknowledges() {
    let t = table();
    holding(&t, 2, &[7]).await;
    let (t2, started) = (t.clone(), Instant::now());
    let writer = tokio::spawn(async move { t2.invalidate(1, &one()).await });
    // Gateway 2's held poll wakes with the invalidation at once.
    let (seq, _, got) = items(t.poll(2, 0).await.unwrap());
    assert_eq!(got, one());
    assert_eq!(started.elapsed(), Duration::ZERO);
    tokio::task::yield_now().await;
    assert!(!writer.is_finished(), "not acknowledged yet");
    // The next poll acknowledges; the writer goes on.
    let poll = tokio::spawn({
        let t = t.clone();
        async move { t.poll(2, seq).await }
    });
    writer.await.unwrap();
    assert!(started.elapsed() < LEASE, "did not wait for the lease");
    assert_eq!(items(poll.await.unwrap().unwrap()).2, vec![], "acknowledged items are gone");
}

#[tokio::test(start_paused = true)]
async fn the_asker_and_expired_gateways_are_not_waited_for() {
    let t = table();
    holding(&t, 1, &[7]).await;
    let started = Instant::now();
    t.invalidate(1, &one()).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "its own change: no callback");
    // Within the slack after the lease, a TTL given just before its end may
    // still be in force in session 1's kernel: waited for, to the slack's end.
    tokio::time::advance(LEASE).await;
    let started = Instant::now();
    t.invalidate(9, &one()).await;
    assert_eq!(started.elapsed(), LEASE / 4, "session 1's lease has run out, not its slack");
    let started = Instant::now();
    t.invalidate(9, &one()).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "session 1's lease and slack have run out");
}

#[tokio::test(start_paused = true)]
async fn a_frozen_gateway_holds_a_writer_for_at_most_its_lease() {
    let t = table();
    holding(&t, 2, &[7]).await;
    tokio::time::advance(Duration::from_millis(300)).await;
    let started = Instant::now();
    t.invalidate(1, &one()).await;
    // the lease of its last poll, and the slack for a TTL that reached the
    // kernel late (a quarter lease)
    assert_eq!(started.elapsed(), Duration::from_millis(700 + 250), "until the lease of its last poll ran out");
    assert_eq!(t.metrics.waits.with_label_values(&["expired"]).get(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_does_not_acknowledge_does_not_renew() {
    let t = table();
    holding(&t, 2, &[7]).await;
    let t2 = t.clone();
    let started = Instant::now();
    let writer = tokio::spawn(async move { t2.invalidate(1, &one()).await });
    let (seq, _, _) = items(t.poll(2, 0).await.unwrap());
    assert!(seq > 0);
    // Polling on without acknowledging: redelivered, never renewed.
    for _ in 0..3 {
        let (lease_ms, _, _, again) = answer(t.poll(2, 0).await.unwrap());
        assert_eq!((lease_ms, again), (0, one()), "no lease granted");
        tokio::time::advance(Duration::from_millis(200)).await;
    }
    writer.await.unwrap();
    assert!(started.elapsed() <= LEASE + LEASE / 4, "{:?}", started.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_collapses_into_all() {
    let t = table();
    holding(&t, 2, &[2]).await;
    let many: Vec<Invalidation> = (0..MAX_QUEUE as u128 + 1).map(|i| Invalidation::attrs(FileId(i + 2))).collect();
    let t2 = t.clone();
    let writer = tokio::spawn(async move { t2.invalidate(1, &many).await });
    tokio::task::yield_now().await;
    let (seq, _, got) = items(t.poll(2, 0).await.unwrap());
    assert_eq!(got, vec![Invalidation::All]);
    let ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(2, seq).await }
    });
    writer.await.unwrap();
    ack.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn answers_are_batched() {
    let t = table();
    holding(&t, 2, &[2]).await;
    let many: Vec<Invalidation> = (0..MAX_BATCH as u128 + 10).map(|i| Invalidation::attrs(FileId(i + 2))).collect();
    let t2 = t.clone();
    let writer = tokio::spawn(async move { t2.invalidate(1, &many).await });
    tokio::task::yield_now().await;
    let (seq, _, first) = items(t.poll(2, 0).await.unwrap());
    assert_eq!(first.len(), MAX_BATCH);
    let (seq2, _, rest) = items(t.poll(2, seq).await.unwrap());
    assert_eq!(rest.len(), 10);
    assert!(!writer.is_finished());
    let ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(2, seq2).await }
    });
    writer.await.unwrap();
    ack.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn after_a_restart_mutations_wait_for_the_leases_granted_before() {
    let record = std::env::temp_dir().join(format!("imca-kernel-leases-{}", std::process::id()));
    let _ = std::fs::remove_file(&record);
    // First start: no record, no grace; granting a lease writes the record.
    let first = Leases::with_record(LEASE, Some(record.clone()), &Registry::new());
    let started = Instant::now();
    first.invalidate(1, &one()).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    holding(&first, 2, &[7]).await;
    assert!(record.exists(), "a granted lease is recorded");
    // A restart right after: the gateway may hold its lease for a while yet.
    let second = Leases::with_record(LEASE, Some(record.clone()), &Registry::new());
    let started = Instant::now();
    second.invalidate(1, &one()).await;
    assert!(started.elapsed() >= LEASE, "waited {:?}", started.elapsed());
    std::fs::remove_file(&record).unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_gateway_that_holds_none_of_it_is_told_but_not_waited_for() {
    let t = table();
    holding(&t, 2, &[7]).await;
    holding(&t, 3, &[8]).await;
    let quiet = tokio::spawn({
        let t = t.clone();
        async move { t.poll(3, 0).await }
    });
    tokio::task::yield_now().await;
    let (t2, started) = (t.clone(), Instant::now());
    let writer = tokio::spawn(async move { t2.invalidate(1, &one()).await });
    // Gateway 2 holds inode 7: its poll wakes at once, and the writer
    // waits for its acknowledgement.
    let (seq, _, got) = items(t.poll(2, 0).await.unwrap());
    assert_eq!(got, one());
    tokio::task::yield_now().await;
    assert!(!writer.is_finished(), "waits for the gateway that holds it");
    let ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(2, seq).await }
    });
    writer.await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(t.metrics.waits.with_label_values(&["not_held"]).get(), 1, "gateway 3 was not waited for");
    // Gateway 3 gets it all the same: its held poll is not woken for it,
    // but answered with it at its quarter lease.
    assert!(!quiet.is_finished());
    let (_, _, got) = items(quiet.await.unwrap().unwrap());
    assert_eq!(got, one());
    assert_eq!(started.elapsed(), LEASE / 4);
    drop(ack);
}

#[tokio::test(start_paused = true)]
async fn a_hold_answers_how_far_to_apply_before_holding() {
    let t = table();
    holding(&t, 3, &[]).await;
    let started = Instant::now();
    t.invalidate(1, &one()).await;
    t.invalidate(1, &one()).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "inode 7 not held: nobody waited for");
    // Gateway 3 read inode 7 meanwhile and now holds it: it must apply the
    // two invalidations queued for it first, and its poll is woken for them.
    assert_eq!(t.hold(3, &[FileId(7).ino()]), Ok(Reply::Held { seq: 2, everything: false }));
    let (seq, _, got) = items(t.poll(3, 0).await.unwrap());
    assert_eq!((seq, got.len()), (2, 2));
    assert_eq!(started.elapsed(), Duration::ZERO, "the poll was woken by the hold");
    // From now on a change of inode 7 waits for it.
    let t2 = t.clone();
    let writer = tokio::spawn(async move { t2.invalidate(1, &one()).await });
    tokio::task::yield_now().await;
    let (seq, _, _) = items(t.poll(3, seq).await.unwrap());
    assert!(!writer.is_finished());
    let _ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(3, seq).await }
    });
    writer.await.unwrap();
    assert!(started.elapsed() < LEASE / 4, "woken and acknowledged, not waited out");
}

#[tokio::test(start_paused = true)]
async fn an_entry_is_held_by_its_directory() {
    let t = table();
    holding(&t, 2, &[40]).await;
    let t2 = t.clone();
    let writer = tokio::spawn(async move { t2.invalidate(1, &[Invalidation::entry(FileId(40), "x"), Invalidation::attrs(FileId(41))]).await });
    tokio::task::yield_now().await;
    let (seq, _, got) = items(t.poll(2, 0).await.unwrap());
    assert_eq!(got.len(), 2);
    assert!(!writer.is_finished(), "the directory is held: waited for");
    let _ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(2, seq).await }
    });
    writer.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn holds_are_bounded_and_asked_only_in_a_known_session() {
    let t = table();
    assert_eq!(t.hold(5, &[1]), Err(FsError(libc::EAGAIN)), "poll first");
    assert_eq!(t.hold(NO_SESSION, &[1]), Err(FsError::EINVAL));
    items(t.poll(5, 0).await.unwrap());
    assert_eq!(t.hold(5, &vec![1; MAX_HOLD + 1]), Err(FsError::EINVAL), "too many in one request");
    let mut next = 0u64;
    let everything = loop {
        let inos: Vec<u64> = (next..next + MAX_HOLD as u64).collect();
        next += MAX_HOLD as u64;
        match t.hold(5, &inos) {
            Ok(Reply::Held { everything: false, .. }) => assert!(next as usize <= MAX_SESSION_HOLDS),
            Ok(Reply::Held { everything: true, .. }) => break next,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(everything as usize, MAX_SESSION_HOLDS + MAX_HOLD, "the record stopped at its bound");
    assert_eq!(t.metrics.holds.get(), 0, "its record is dropped");
    // Past its bound, a session is waited for on every change.
    let t2 = t.clone();
    let writer = tokio::spawn(async move { t2.invalidate(1, &[Invalidation::attrs(FileId(1 << 100))]).await });
    tokio::task::yield_now().await;
    let (seq, _, _) = items(t.poll(5, 0).await.unwrap());
    assert!(!writer.is_finished());
    let _ack = tokio::spawn({
        let t = t.clone();
        async move { t.poll(5, seq).await }
    });
    writer.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_hold_given_back_is_no_longer_waited_for() {
    let t = table();
    holding(&t, 2, &[7]).await;
    assert_eq!(t.metrics.holds.get(), 1);
    t.unhold(2, &[FileId(7).ino(), FileId(8).ino()]).unwrap();
    assert_eq!(t.metrics.holds.get(), 0);
    let started = Instant::now();
    t.invalidate(1, &one()).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "not waited for");
    assert_eq!(t.unhold(99, &[1]), Ok(()), "an unknown session holds nothing");
    assert_eq!(t.unhold(NO_SESSION, &[1]), Err(FsError::EINVAL));
}
