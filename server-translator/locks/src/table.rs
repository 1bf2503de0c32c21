//! The lock table of one storage server: who holds which range of which
//! file, who waits, and what a restart must get back.
//!
//! ```text
//!  gateway G (session g) ── Setlk{fid, lock, wait} ──> Locks (translator) ──> LockTable::setlk
//!      conflict with a live holder:  wait=false → EAGAIN
//!                                    wait=true  → hold the request (≤ HOLD) until a release
//!                                                 wakes it; still blocked → EAGAIN, G asks again
//!      conflict with a dead holder (its gateway stopped polling, lease over):
//!                                    drop all that gateway's locks, look again
//!      no conflict:                  set it ([`table`]), wake the waiters
//!  after a restart, during the grace ([`recovery`]):
//!    gateway G ── Reclaim{fid, lock} ──> granted unless it conflicts
//!    anyone    ── Setlk (a new lock) ──> EAGAIN, or held until the grace ends
//! ```
//!
//! Locks live in this table only: never in the exported file system,
//! because a lock belongs to a gateway session and lives as long as that
//! gateway's kernel-cache lease ([`upcall::leases`]). Stripe sends every
//! lock request of a file to one server, so this table decides alone. A
//! restarted server starts with no locks, and gets back those gateways
//! still hold by their reclaims during a grace period ([`recovery`]).
//! Everything is bounded: locks per file, per session and in all
//! ([`MAX_PER_FILE`], [`MAX_PER_SESSION`], [`MAX_LOCKS`]; past them
//! ENOLCK), and requests held waiting ([`MAX_WAITERS`]; past it EAGAIN at
//! once, and the gateway asks again).

pub mod recovery;

use xlator::lock_table as table;

use upcall::Leases;
use prometheus::{IntCounterVec, IntGauge, Registry};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;
use table::{FileLocks, Held, Holder};
use tokio::sync::Notify;
use tokio::time::Instant;
use wire::NO_SESSION;
use xlator::{FileId, FsError, FsResult, Loc, Lock, LockKind, LockType};

/// Locks on one file.
pub const MAX_PER_FILE: usize = 4096;
/// Locks one gateway holds on this server.
pub const MAX_PER_SESSION: usize = 65536;
/// Locks on this server.
pub const MAX_LOCKS: usize = 262_144;
/// Blocking requests held at once.
pub const MAX_WAITERS: usize = 4096;
/// Blocking requests of one gateway held at once: each holds one of its
/// connection's in-flight slots, which its polls need too.
pub const MAX_WAITERS_PER_SESSION: usize = 32;
/// How long a blocking request is held before the gateway is told to ask
/// again (well inside the gateway's 10 s operation timeout).
pub const HOLD: Duration = wire::LOCK_HOLD;

#[derive(Default)]
struct State {
    files: HashMap<FileId, FileLocks>,
    /// per session: locks held, and when it first took one here (a lock
    /// taken before the gateway's first poll arrived is not orphaned)
    sessions: HashMap<u64, (usize, Instant)>,
    total: usize,
    last_sweep: Option<Instant>,
    /// blocking requests held, per session
    waiting: HashMap<u64, usize>,
    /// applications' locks held (not the gateways' append locks): what a
    /// restart would make gateways reclaim
    app_locks: usize,
    /// whether the marker "locks may be held" is on disk ([`recovery`])
    marked: bool,
    /// since when no application lock is held
    emptied: Option<Instant>,
}

struct Metrics {
    /// `imca_storage_lock_requests_total{op, outcome}`
    requests: IntCounterVec,
    /// `imca_storage_locks_held`
    held: IntGauge,
    /// `imca_storage_lock_waiters`
    waiters: IntGauge,
    /// `imca_storage_locks_reclaimed_total`: dropped when their gateway's lease ran out
    reclaimed: prometheus::IntCounter,
    /// `imca_storage_lock_reclaims_total{outcome}`: gateways' reclaims after a restart
    reclaims: IntCounterVec,
    /// `imca_storage_lock_grace`: 1 while the grace after a restart lasts
    grace: IntGauge,
}

impl Metrics {
    fn register(registry: &Registry) -> Metrics {
        let requests = metric_series::counter_vec("imca_storage_lock_requests_total", "Lock requests (getlk, setlk) by outcome", &["op", "outcome"]);
        let held = metric_series::gauge("imca_storage_locks_held", "POSIX and flock locks held on this server");
        let waiters = metric_series::gauge("imca_storage_lock_waiters", "Blocking lock requests waiting on this server");
        let reclaimed = metric_series::counter("imca_storage_locks_reclaimed_total", "Locks dropped because their gateway's lease ran out");
        let reclaims = metric_series::counter_vec("imca_storage_lock_reclaims_total", "Locks gateways asked back after this server restarted, by outcome (granted, held: it still was, late: after the grace, conflict, refused: the table was full)", &["outcome"]);
        let grace = metric_series::gauge("imca_storage_lock_grace", "1 while the grace after a restart lasts (gateways reclaim their locks; no new lock is granted)");
        let _ = registry.register(Box::new(reclaims.clone()));
        let _ = registry.register(Box::new(grace.clone()));
        let _ = registry.register(Box::new(requests.clone()));
        let _ = registry.register(Box::new(held.clone()));
        let _ = registry.register(Box::new(waiters.clone()));
        let _ = registry.register(Box::new(reclaimed.clone()));
        Metrics { requests, held, waiters, reclaimed, reclaims, grace }
    }

    fn count(&self, op: &str, outcome: &str) {
        self.requests.with_label_values(&[op, outcome]).inc();
    }
}

/// The lock table of one storage server.
pub struct LockTable {
    state: Mutex<State>,
    /// every waiter wakes on any release and looks again
    released: Notify,
    waiters: AtomicUsize,
    /// how long a session's lease lasts (grace for a gateway not yet polling)
    lease: Duration,
    hold: Duration,
    /// after a restart, no new lock is granted before then ([`recovery`])
    grace_until: Instant,
    /// the marker file that says locks may be held (None: none kept)
    marker: Option<std::path::PathBuf>,
    metrics: Metrics,
}

/// Counts a held request of a session while it waits.
struct Waiting<'a>(&'a LockTable, u64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap();
        if let Some(n) = st.waiting.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                st.waiting.remove(&self.1);
            }
        }
        self.0.waiters.fetch_sub(1, SeqCst);
        self.0.metrics.waiters.dec();
    }
}

impl LockTable {
    pub fn new(lease: Duration, registry: &Registry) -> LockTable {
        LockTable::with_hold(lease, HOLD, registry)
    }

    /// With another hold time (tests).
    pub fn with_hold(lease: Duration, hold: Duration, registry: &Registry) -> LockTable {
        LockTable {
            state: Mutex::default(),
            released: Notify::new(),
            waiters: AtomicUsize::new(0),
            lease,
            hold,
            grace_until: Instant::now(),
            marker: None,
            metrics: Metrics::register(registry),
        }
    }

    /// F_GETLK from `session`: the lock blocking `lock`, or `lock` unlocked.
    /// During the grace the table does not know every lock yet: the answer
    /// waits for its end (up to the hold time; then EAGAIN, ask again).
    pub async fn getlk(&self, session: u64, loc: &Loc, lock: Lock, live: &Leases) -> FsResult<Lock> {
        table::check(&lock)?;
        let fid = loc.fid.ok_or(FsError::EINVAL)?;
        if self.in_grace() && lock.kind != LockKind::Append {
            tokio::time::sleep_until(self.grace_until.min(Instant::now() + self.hold)).await;
            if self.in_grace() {
                self.metrics.count("getlk", "grace");
                return Err(FsError(libc::EAGAIN));
            }
        }
        let holder = Holder { session, owner: lock.owner };
        let mut st = self.state.lock().unwrap();
        match self.live_conflict(&mut st, fid, holder, &lock, live) {
            Some(h) => {
                self.metrics.count("getlk", "conflict");
                // Another gateway's owner number means nothing to the asker.
                Ok(Lock { owner: 0, ..h.to_lock() })
            }
            None => {
                self.metrics.count("getlk", "free");
                Ok(Lock { typ: LockType::Unlock, ..lock })
            }
        }
    }

    /// Take, change or drop a lock for `session`; with `wait`, hold the
    /// request up to the hold time for a conflicting lock to go.
    pub async fn setlk(&self, session: u64, loc: &Loc, lock: Lock, wait: bool, live: &Leases) -> FsResult<()> {
        table::check(&lock)?;
        let fid = loc.fid.ok_or(FsError::EINVAL)?;
        if session == NO_SESSION {
            // No lease would ever end such a lock: only gateways lock.
            return Err(FsError(libc::ENOLCK));
        }
        let holder = Holder { session, owner: lock.owner };
        let deadline = Instant::now() + self.hold;
        let mut waiting = None;
        loop {
            // Armed before looking, so a release in between is not missed.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            // During the grace only reclaims take locks: a new one could
            // collide with one not reclaimed yet.
            let grace = self.in_grace() && lock.typ != LockType::Unlock && lock.kind != LockKind::Append;
            if !grace {
                let mut st = self.state.lock().unwrap();
                if self.live_conflict(&mut st, fid, holder, &lock, live).is_none() {
                    let r = self.set(&mut st, fid, holder, &lock);
                    self.metrics.count("setlk", if r.is_ok() { "granted" } else { "refused" });
                    return r;
                }
            }
            if !wait {
                self.metrics.count("setlk", if grace { "grace" } else { "conflict" });
                return Err(FsError(libc::EAGAIN));
            }
            if waiting.is_none() {
                waiting = Some(self.start_waiting(session).ok_or_else(|| {
                    self.metrics.count("setlk", "busy");
                    FsError(libc::EAGAIN)
                })?);
            }
            let now = Instant::now();
            if now >= deadline {
                self.metrics.count("setlk", "retry");
                return Err(FsError(libc::EAGAIN));
            }
            // Look again on a release, and now and then to notice a holder
            // whose lease ran out.
            let mut recheck = (now + (self.lease / 2).max(Duration::from_millis(10))).min(deadline);
            if grace {
                recheck = recheck.min(self.grace_until);
            }
            let _ = tokio::time::timeout_at(recheck, released).await;
        }
    }

    /// Count a held request, within the bounds (None: too many).
    fn start_waiting(&self, session: u64) -> Option<Waiting<'_>> {
        let mut st = self.state.lock().unwrap();
        let mine = st.waiting.get(&session).copied().unwrap_or(0);
        if mine >= MAX_WAITERS_PER_SESSION || self.waiters.load(SeqCst) >= MAX_WAITERS {
            return None;
        }
        st.waiting.insert(session, mine + 1);
        self.waiters.fetch_add(1, SeqCst);
        self.metrics.waiters.inc();
        Some(Waiting(self, session))
    }

    /// The conflicting lock of a live holder; the locks of holders whose
    /// gateway's lease ran out are dropped on the way (and their waiters woken).
    fn live_conflict(&self, st: &mut State, fid: FileId, holder: Holder, lock: &Lock, live: &Leases) -> Option<Held> {
        self.sweep(st, live);
        loop {
            let h = st.files.get(&fid)?.conflict(holder, lock)?;
            if !self.dead(st, h.holder.session, live) {
                return Some(h);
            }
            self.drop_session(st, h.holder.session);
        }
    }

    fn dead(&self, st: &State, session: u64, live: &Leases) -> bool {
        let since = st.sessions.get(&session).map_or(Instant::now(), |(_, t)| *t);
        !live.is_live(session) && Instant::now() >= since + self.lease
    }

    /// Now and then (once a lease), drop the locks of every dead session,
    /// so they do not wait for a conflict to be noticed.
    fn sweep(&self, st: &mut State, live: &Leases) {
        let now = Instant::now();
        if st.last_sweep.is_some_and(|t| now < t + self.lease) {
            return;
        }
        st.last_sweep = Some(now);
        self.tidy_marker(st);
        let dead: Vec<u64> = st.sessions.keys().copied().filter(|s| self.dead(st, *s, live)).collect();
        for s in dead {
            self.drop_session(st, s);
        }
    }

    fn drop_session(&self, st: &mut State, session: u64) {
        let (mut dropped, mut app_dropped) = (0, 0);
        st.files.retain(|_, f| {
            let app_before = recovery::app_count(f);
            dropped += f.drop_session(session);
            app_dropped += app_before - recovery::app_count(f);
            !f.is_empty()
        });
        st.app_locks -= app_dropped;
        if st.app_locks == 0 {
            st.emptied = Some(Instant::now());
        }
        st.sessions.remove(&session);
        st.total -= dropped;
        self.metrics.reclaimed.inc_by(dropped as u64);
        self.metrics.held.set(st.total as i64);
        tracing::info!(session = format_args!("{session:016x}"), locks = dropped, "a gateway's lease ran out: its locks are released");
        self.released.notify_waiters();
    }

    /// Set `lock` (no conflict), within the bounds.
    fn set(&self, st: &mut State, fid: FileId, holder: Holder, lock: &Lock) -> FsResult<()> {
        let none = FileLocks::default();
        let file = st.files.get(&fid).unwrap_or(&none);
        let (before, len_before) = (file.count(holder.session), file.len());
        let session_had = st.sessions.get(&holder.session).map_or(0, |(n, _)| *n);
        // A set adds at most two locks (a range cut out of the middle of
        // another): only near a bound is the outcome worth computing.
        let near = len_before + 2 > MAX_PER_FILE || session_had + 2 > MAX_PER_SESSION || st.total + 2 > MAX_LOCKS;
        if near {
            let len_after = table::after_set(file, holder, lock);
            let grows = len_after > len_before;
            if len_after > MAX_PER_FILE || (grows && (session_had + 2 > MAX_PER_SESSION || st.total + 2 > MAX_LOCKS)) {
                tracing::warn!(session = format_args!("{:016x}", holder.session), "lock table full: ENOLCK");
                return Err(FsError(libc::ENOLCK));
            }
        }
        let app = lock.kind != LockKind::Append;
        if app && lock.typ != LockType::Unlock {
            // Before the grant: a restart must know to wait for its reclaim.
            self.mark(st)?;
        }
        let file = st.files.entry(fid).or_default();
        let app_before = if app { recovery::app_count(file) } else { 0 };
        file.set(holder, lock);
        if app {
            st.app_locks = st.app_locks + recovery::app_count(st.files.get(&fid).expect("just set")) - app_before;
            if st.app_locks == 0 {
                st.emptied = Some(Instant::now());
            }
        }
        let file = st.files.get(&fid).expect("just set");
        let (after, len_after) = (file.count(holder.session), file.len());
        if len_after == 0 {
            st.files.remove(&fid);
        }
        st.total = st.total + len_after - len_before;
        let entry = st.sessions.entry(holder.session).or_insert((0, Instant::now()));
        entry.0 = entry.0 + after - before;
        if entry.0 == 0 {
            st.sessions.remove(&holder.session);
        }
        self.metrics.held.set(st.total as i64);
        // Taking a write lock frees nothing; anything else may.
        if lock.typ != LockType::Write {
            self.released.notify_waiters();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
