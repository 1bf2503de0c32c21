//! The lease table of one storage server: each gateway session's
//! kernel-cache lease, the inodes it holds, and the invalidations queued
//! for it. The [`crate::Upcall`] translator fills the queues; protocol-server
//! hands it the Poll, Hold and Unhold requests.
//!
//! ```text
//!  gateway H: Hold{h, inos} ──> hold(): h's kernel may cache these from now on
//!  gateway H: Poll{h, acked} ──> poll(): renew h's lease (only if h acked all it was sent),
//!                                        drop what h acked, answer h's queue (or wait ≤ hold)
//!  gateway G: [session g] write ──> Upcall ──> below ──> invalidate(g, items):
//!                                        queue items for every other live session,
//!                                        wait until each that holds one acked them
//!                                        or its lease ran out
//!                                   ──> reply to G
//! ```
//!
//! A gateway may let its kernel cache attributes, entries and pages only
//! while it holds a lease, counted from when it *sent* its last renewing
//! poll; the server counts the same lease from when it *received* that poll,
//! and a quarter lease more (the slack: a TTL reaches the kernel a moment
//! after the gateway computed it, later on a loaded machine), so a gateway's
//! lease always ends first. A mutation is acknowledged only after every
//! other live gateway that holds what it changes confirmed it dropped it,
//! or after its lease and slack ended (a frozen or partitioned gateway's
//! kernel has stopped using what it cached by then): the promise "after a
//! mutation is acknowledged, every gateway sees it" holds with kernel
//! caching on.
//!
//! **Holds.** A gateway tells each server which inodes it is about to let
//! its kernel (or its memo) answer from (`Hold`), and does so only once
//! every server recorded them and it applied every invalidation queued
//! for it before that (the `Held` answer's `seq`). A mutation waits only
//! for the gateways that hold what it names (an entry: its directory);
//! the others get its invalidations too, without anyone waiting, at their
//! next poll, so what they remember unheld stays right for when they hold
//! it. Without holds every idle gateway cost every writer a callback round
//! trip per change (docs/benchmarks/archive/issue-12-kernel-caching.md, stop 21). A gateway gives a hold
//! back (`Unhold`) once its kernel forgot the inode. The record is bounded
//! ([`MAX_SESSION_HOLDS`] per session, [`MAX_HOLDS`] per server), and a
//! session past it is waited for on every change, as before holds.
//!
//! A poll renews the lease only if it acknowledges everything already sent
//! to that session, so a gateway that polls but never applies its
//! invalidations cannot hold writers up for more than 1.25 leases. Everything
//! is bounded: sessions ([`MAX_SESSIONS`], expired ones are forgotten first),
//! each session's queue ([`MAX_QUEUE`], past it the queue collapses into one
//! `All`), and each answer ([`MAX_BATCH`]).

mod metrics;

use metrics::Metrics;
use prometheus::Registry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use wire::{Invalidation, Reply, MAX_HOLD, NO_SESSION};
use xlator::{FsError, FsResult};

/// Sessions (gateways) one server keeps.
pub const MAX_SESSIONS: usize = 1024;
/// Invalidations queued for one session before they collapse into `All`.
pub const MAX_QUEUE: usize = 4096;
/// Invalidations in one poll answer.
pub const MAX_BATCH: usize = 256;
/// Inodes one session may hold before it is waited for on every change.
pub const MAX_SESSION_HOLDS: usize = 1 << 20;
/// Inodes all sessions together may hold (8 bytes each and the set's
/// overhead: about 64 MiB at most).
pub const MAX_HOLDS: usize = 1 << 21;
/// The lease when none is configured.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(1);

struct Session {
    /// when the last renewing poll arrived
    renewed: Instant,
    /// queued, not yet acknowledged: (seq, item)
    queue: VecDeque<(u64, Invalidation)>,
    /// seq of the last item queued
    last_seq: u64,
    /// highest seq sent in an answer
    delivered: u64,
    /// highest seq acknowledged (waiters watch it)
    acked: watch::Sender<u64>,
    /// a held poll waits on this
    wake: Arc<Notify>,
    /// what its kernel may hold (see the module page)
    holds: Holds,
}

/// The inodes a session told this server it holds.
enum Holds {
    These(HashSet<u64>),
    /// the record was full: every change waits for it
    Everything,
}

impl Holds {
    fn len(&self) -> usize {
        match self {
            Holds::These(h) => h.len(),
            Holds::Everything => 0,
        }
    }

    /// Whether a change naming `items` must wait for this session.
    fn any(&self, items: &[Invalidation]) -> bool {
        let Holds::These(h) = self else { return true };
        items.iter().any(|i| match i {
            Invalidation::Inode { fid, .. } => h.contains(&fid.ino()),
            Invalidation::Entry { parent, .. } => h.contains(&parent.ino()),
            Invalidation::All => true,
        })
    }
}

impl Session {
    fn new(now: Instant) -> Session {
        Session {
            renewed: now,
            queue: VecDeque::new(),
            last_seq: 0,
            delivered: 0,
            acked: watch::Sender::new(0),
            wake: Arc::new(Notify::new()),
            holds: Holds::These(HashSet::new()),
        }
    }

    /// Queue `items`; a held poll is answered at once if `waited` (a writer
    /// waits for it) or once a batch is full, else at its quarter lease.
    fn push(&mut self, items: &[Invalidation], waited: bool) -> u64 {
        if self.queue.len() + items.len() > MAX_QUEUE {
            // The gateway drops everything it has: one item says so.
            self.queue.clear();
            self.last_seq += 1;
            self.queue.push_back((self.last_seq, Invalidation::All));
        } else {
            for i in items {
                self.last_seq += 1;
                self.queue.push_back((self.last_seq, i.clone()));
            }
        }
        if waited || self.queue.len() >= MAX_BATCH {
            self.wake.notify_one();
        }
        self.last_seq
    }

    fn ack(&mut self, acked: u64) {
        let acked = acked.min(self.delivered);
        if acked > *self.acked.borrow() {
            while self.queue.front().is_some_and(|(s, _)| *s <= acked) {
                self.queue.pop_front();
            }
            self.acked.send_replace(acked);
        }
    }

    /// The next answer: everything not yet acknowledged, up to a batch.
    fn answer(&mut self, lease: Duration, fresh: bool) -> Reply {
        let items: Vec<Invalidation> = self.queue.iter().take(MAX_BATCH).map(|(_, i)| i.clone()).collect();
        let seq = self.queue.get(items.len().wrapping_sub(1)).map_or(*self.acked.borrow(), |(s, _)| *s);
        self.delivered = self.delivered.max(seq);
        Reply::Callbacks { lease_ms: lease.as_millis() as u32, seq, fresh, items }
    }
}

/// The lease table of one storage server (see the module page).
pub struct Leases {
    lease: Duration,
    /// how much longer than a lease the server keeps counting a gateway as
    /// holding it (see [`Leases::holds_until`])
    slack: Duration,
    /// how long a poll waits for something to answer
    hold: Duration,
    sessions: Mutex<HashMap<u64, Session>>,
    /// mutations wait until then: leases granted before a restart
    grace_until: Instant,
    /// the record of granted leases, and when it was last refreshed
    record: Option<(PathBuf, Mutex<Option<Instant>>)>,
    metrics: Metrics,
}

impl Leases {
    pub fn new(lease: Duration, registry: &Registry) -> Leases {
        Leases::with_record(lease, None, registry)
    }

    /// Keep the record of granted leases at `record`; if it says leases
    /// may still be held (a restart), mutations wait until they ran out.
    pub fn with_record(lease: Duration, record: Option<PathBuf>, registry: &Registry) -> Leases {
        let lease = lease.max(Duration::from_millis(10));
        let grace = record.as_deref().map_or(Duration::ZERO, |p| grace_left(p, lease));
        if !grace.is_zero() {
            tracing::info!(?grace, "gateways may still hold kernel-cache leases from before a restart; mutations wait for them");
        }
        Leases {
            lease,
            slack: lease / 4,
            hold: lease / 4,
            sessions: Mutex::default(),
            grace_until: Instant::now() + grace,
            record: record.map(|p| (p, Mutex::new(None))),
            metrics: Metrics::register(registry),
        }
    }

    /// Refresh the record's mtime, at most every quarter lease (before the
    /// lease it covers is granted).
    fn note_grant(&self, now: Instant) {
        let Some((path, last)) = &self.record else { return };
        let mut last = last.lock().unwrap();
        if last.is_some_and(|t| now < t + self.lease / 4) {
            return;
        }
        let touched = std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        match touched {
            Ok(()) => *last = Some(now),
            Err(e) => tracing::warn!(path = %path.display(), "cannot record kernel-cache leases: {e}"),
        }
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Whether gateway `session` holds a lease now (the lock table drops the
    /// locks of one that does not).
    pub fn is_live(&self, session: u64) -> bool {
        self.sessions.lock().unwrap().get(&session).is_some_and(|s| self.live(s, Instant::now()))
    }

    /// How long since gateway `session` last renewed its lease here (None:
    /// this server does not know it).
    pub fn silent_for(&self, session: u64) -> Option<Duration> {
        self.sessions.lock().unwrap().get(&session).map(|s| s.renewed.elapsed())
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now < self.holds_until(s)
    }

    /// Until when gateway `s` may have something in its kernel under its
    /// last lease. The gateway counts the lease from when it sent the poll,
    /// which is before it arrived here; but it gives the kernel a TTL of
    /// what is left of it a moment *before* the kernel applies it, and on a
    /// loaded machine a thread can be preempted between the two for tens
    /// or hundreds of milliseconds. Counting a quarter lease more covers
    /// such delays; it only lengthens what a dead or frozen gateway costs a
    /// writer (1.25 leases instead of one).
    fn holds_until(&self, s: &Session) -> Instant {
        s.renewed + self.lease + self.slack
    }

    /// Gateway `session` renews its lease and acknowledges up to `acked`;
    /// answers its invalidations (waiting up to a quarter lease for some).
    pub async fn poll(&self, session: u64, acked: u64) -> FsResult<Reply> {
        if session == NO_SESSION {
            return Err(FsError::EINVAL);
        }
        let wake = {
            let mut t = self.sessions.lock().unwrap();
            let now = Instant::now();
            let fresh = !t.contains_key(&session);
            if fresh {
                self.make_room(&mut t, now)?;
                t.insert(session, Session::new(now));
                self.metrics.sessions.set(t.len() as i64);
            }
            let s = t.get_mut(&session).expect("just inserted");
            // Renewed only by a gateway that applied all it was sent; the
            // answer grants no lease (0) otherwise.
            let renewed = fresh || acked >= s.delivered;
            if !fresh {
                s.ack(acked);
                if renewed {
                    s.renewed = now;
                }
            }
            let lease = if renewed { self.lease } else { Duration::ZERO };
            if renewed {
                self.note_grant(now);
            }
            if fresh || !s.queue.is_empty() {
                return Ok(s.answer(lease, fresh));
            }
            (s.wake.clone(), lease)
        };
        let (wake, lease) = wake;
        let _ = tokio::time::timeout(self.hold, wake.notified()).await;
        let mut t = self.sessions.lock().unwrap();
        match t.get_mut(&session) {
            Some(s) => Ok(s.answer(lease, false)),
            None => Err(FsError(libc::EAGAIN)),
        }
    }

    /// Gateway `session` is about to let its kernel cache `inos`: record
    /// them; answer the seq of the last invalidation queued for it, which
    /// it applies before it does (EAGAIN: this server does not know the
    /// session; it polls first).
    pub fn hold(&self, session: u64, inos: &[u64]) -> FsResult<Reply> {
        if session == NO_SESSION || inos.len() > MAX_HOLD {
            return Err(FsError::EINVAL);
        }
        let mut t = self.sessions.lock().unwrap();
        let total = self.metrics.holds.get() as usize;
        let s = t.get_mut(&session).ok_or(FsError(libc::EAGAIN))?;
        if let Holds::These(h) = &mut s.holds {
            let before = h.len();
            if before + inos.len() > MAX_SESSION_HOLDS || total + inos.len() > MAX_HOLDS {
                tracing::warn!(session, held = before, "a gateway's record of held inodes is full; every change waits for it");
                s.holds = Holds::Everything;
                self.metrics.holds.sub(before as i64);
            } else {
                h.extend(inos);
                self.metrics.holds.add((h.len() - before) as i64);
            }
        }
        if s.last_seq > s.delivered {
            // It is about to wait for these: answer its poll now.
            s.wake.notify_one();
        }
        Ok(Reply::Held { seq: s.last_seq, everything: matches!(s.holds, Holds::Everything) })
    }

    /// Gateway `session`'s kernel dropped `inos`: changes of them no
    /// longer wait for it (one past its bound is waited for on every change
    /// still). A session this server does not know holds nothing here.
    pub fn unhold(&self, session: u64, inos: &[u64]) -> FsResult<()> {
        if session == NO_SESSION || inos.len() > MAX_HOLD {
            return Err(FsError::EINVAL);
        }
        let mut t = self.sessions.lock().unwrap();
        if let Some(Session { holds: Holds::These(h), .. }) = t.get_mut(&session) {
            let before = h.len();
            for ino in inos {
                h.remove(ino);
            }
            self.metrics.holds.sub((before - h.len()) as i64);
        }
        Ok(())
    }

    /// Gateway `session` asked for a new object `ino` (a create, mkdir,
    /// mknod or symlink with the id it drew): it holds it, recorded before
    /// the object exists, so nothing about it can have been missed.
    pub fn hold_new(&self, session: u64, ino: u64) {
        if session != NO_SESSION {
            let _ = self.hold(session, &[ino]);
        }
    }

    /// Forget expired sessions when the table is full; refuse if all live.
    fn make_room(&self, t: &mut HashMap<u64, Session>, now: Instant) -> FsResult<()> {
        if t.len() < MAX_SESSIONS {
            return Ok(());
        }
        t.retain(|_, s| self.live(s, now));
        self.metrics.holds.set(t.values().map(|s| s.holds.len() as i64).sum());
        if t.len() >= MAX_SESSIONS {
            tracing::warn!(max = MAX_SESSIONS, "kernel-cache sessions full; a gateway gets no lease");
            return Err(FsError(libc::EAGAIN));
        }
        Ok(())
    }

    /// `items` changed at the request of `from`: every other gateway with a
    /// live lease drops them from its kernel before this returns (or its
    /// lease runs out).
    pub async fn invalidate(&self, from: u64, items: &[Invalidation]) {
        if items.is_empty() {
            return;
        }
        if Instant::now() < self.grace_until {
            tokio::time::sleep_until(self.grace_until).await;
        }
        let waits: Vec<(u64, u64, watch::Receiver<u64>)> = {
            let mut t = self.sessions.lock().unwrap();
            let now = Instant::now();
            let mut not_held = 0;
            let waits = t
                .iter_mut()
                .filter(|(id, s)| **id != from && self.live(s, now))
                .filter_map(|(id, s)| {
                    let waited = s.holds.any(items);
                    let target = s.push(items, waited);
                    not_held += u64::from(!waited);
                    waited.then(|| (*id, target, s.acked.subscribe()))
                })
                .collect();
            self.metrics.waits.with_label_values(&["not_held"]).inc_by(not_held);
            waits
        };
        if waits.is_empty() {
            return;
        }
        let started = Instant::now();
        futures::future::join_all(waits.into_iter().map(|(id, target, rx)| self.wait(id, target, rx))).await;
        self.metrics.wait.observe(started.elapsed().as_secs_f64());
    }

    async fn wait(&self, session: u64, target: u64, mut rx: watch::Receiver<u64>) {
        loop {
            if *rx.borrow_and_update() >= target {
                self.metrics.waits.with_label_values(&["acked"]).inc();
                return;
            }
            let deadline = match self.sessions.lock().unwrap().get(&session) {
                Some(s) => self.holds_until(s),
                None => return,
            };
            if Instant::now() >= deadline {
                self.metrics.waits.with_label_values(&["expired"]).inc();
                tracing::debug!(session, "a gateway's lease ran out before it acknowledged an invalidation");
                return;
            }
            // A renewal moves the deadline; the loop reads it again.
            if let Ok(Err(_)) = tokio::time::timeout_at(deadline, rx.changed()).await {
                return;
            }
        }
    }
}

/// How long leases granted before this start may still be held: the
/// record was refreshed at least every quarter lease while granting.
fn grace_left(record: &std::path::Path, lease: Duration) -> Duration {
    let Ok(modified) = std::fs::metadata(record).and_then(|m| m.modified()) else { return Duration::ZERO };
    let until = modified + lease + lease / 4;
    until.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO).min(lease * 2)
}

#[cfg(test)]
mod tests;
