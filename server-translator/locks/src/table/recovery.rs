//! Locks across a restart of this server: a marker, a grace period, reclaims
//! (NFSv4's and Lustre's recovery are the models).
//!
//! ```text
//!  first application lock granted  ──> marker "locks may be held" written (and synced) first
//!  table empty for a lease           ──> marker removed (lazily, on a poll or a lock call)
//!  start with the marker present     ──> grace: `grace` long, no new lock is granted,
//!                                        gateways Reclaim what their owners still hold
//!  gateway: poll answered "fresh"    ──> Reclaim{fid, lock} for each lock it holds here
//!        granted: in the grace and no conflict (or this server holds it still)
//!        ENOLCK:  after the grace, or it conflicts, or the table is full
//!                 → the gateway reports the lock lost to its owner (EIO)
//! ```
//!
//! Without the marker (a fresh export, or no application lock held when the
//! server stopped) there is no grace: nothing could be reclaimed. The
//! gateways' own append locks are left out of all this: they last one
//! append, which a restart fails anyway, and they never conflict with an
//! application's locks.

use xlator::lock_table::{self as table, FileLocks, Holder};
use super::{LockTable, State};
use upcall::Leases;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;
use wire::NO_SESSION;
use xlator::{FsError, FsResult, Loc, Lock, LockKind, LockType};

/// How long a restarted server waits for reclaims when locks may have been
/// held: long enough for every gateway to notice the restart (its poll
/// backs off to a second at most while the server is away) and send them.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// The marker's name, next to the kernel-lease record.
pub const MARKER: &str = "locks-held";

/// Applications' locks in `f` (not the gateways' append locks).
pub(super) fn app_count(f: &FileLocks) -> usize {
    f.held().iter().filter(|h| h.kind != LockKind::Append).count()
}

impl LockTable {
    /// Keep the marker at `marker`; if it is there (locks may have been held
    /// when this server stopped), grant no new lock for `grace` while
    /// gateways reclaim theirs.
    pub fn with_recovery(lease: Duration, marker: PathBuf, grace: Duration, registry: &prometheus::Registry) -> LockTable {
        let mut locks = LockTable::new(lease, registry);
        let held_before = marker.exists();
        if held_before && !grace.is_zero() {
            tracing::info!(?grace, "locks may have been held before this start: grace period for gateways to reclaim them");
            locks.grace_until = Instant::now() + grace;
            locks.metrics.grace.set(1);
        }
        {
            let st = locks.state.get_mut().unwrap();
            st.marked = held_before;
            st.emptied = Some(Instant::now());
        }
        locks.marker = Some(marker);
        locks
    }

    /// Whether the grace after a restart lasts.
    pub fn in_grace(&self) -> bool {
        Instant::now() < self.grace_until
    }

    /// Gateway `session` asks back `lock`, which one of its owners was
    /// granted before this server restarted (see the module page).
    pub fn reclaim(&self, session: u64, loc: &Loc, lock: Lock, live: &Leases) -> FsResult<()> {
        table::check(&lock)?;
        let fid = loc.fid.ok_or(FsError::EINVAL)?;
        if session == NO_SESSION {
            return Err(FsError(libc::ENOLCK));
        }
        if lock.typ == LockType::Unlock || lock.kind == LockKind::Append {
            return Err(FsError::EINVAL);
        }
        let holder = Holder { session, owner: lock.owner };
        let mut st = self.state.lock().unwrap();
        if st.files.get(&fid).is_some_and(|f| f.covers(holder, &lock)) {
            // A server that did not restart (or a reclaim sent twice).
            self.metrics.reclaims.with_label_values(&["held"]).inc();
            return Ok(());
        }
        let refused = |outcome: &str| {
            self.metrics.reclaims.with_label_values(&[outcome]).inc();
            tracing::warn!(session = format_args!("{session:016x}"), ?fid, outcome, "a gateway's lock could not be reclaimed: it is lost");
            Err(FsError(libc::ENOLCK))
        };
        if !self.in_grace() {
            return refused("late");
        }
        // Holders were consistent before the restart, so reclaims cannot
        // collide; a gateway that lost a lock without noticing could. (A
        // gateway that died since reclaiming loses its locks, as always.)
        if self.live_conflict(&mut st, fid, holder, &lock, live).is_some() {
            return refused("conflict");
        }
        match self.set(&mut st, fid, holder, &lock) {
            Ok(()) => {
                self.metrics.reclaims.with_label_values(&["granted"]).inc();
                Ok(())
            }
            Err(_) => refused("refused"),
        }
    }

    /// Now and then (every poll): end the grace's gauge, and remove the
    /// marker once no application lock has been held for a lease.
    pub fn tidy(&self) {
        let mut st = self.state.lock().unwrap();
        self.tidy_marker(&mut st);
    }

    pub(super) fn tidy_marker(&self, st: &mut State) {
        if self.in_grace() {
            return;
        }
        self.metrics.grace.set(0);
        let Some(path) = &self.marker else { return };
        let quiet = st.emptied.is_some_and(|t| Instant::now() >= t + self.lease);
        if st.marked && st.app_locks == 0 && quiet {
            // Not synced: a marker that comes back only costs a grace.
            match std::fs::remove_file(path) {
                Ok(()) => st.marked = false,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => st.marked = false,
                Err(e) => tracing::warn!(path = %path.display(), "cannot remove the lock marker: {e}"),
            }
        }
    }

    /// Write the marker before an application lock is granted, if it is
    /// not there (once per period with locks held, not once a lock).
    pub(super) fn mark(&self, st: &mut State) -> FsResult<()> {
        let Some(path) = &self.marker else { return Ok(()) };
        if st.marked {
            return Ok(());
        }
        match write_synced(path) {
            Ok(()) => {
                st.marked = true;
                Ok(())
            }
            Err(e) => {
                // A lock a restart would forget without telling anyone: refused.
                tracing::warn!(path = %path.display(), "cannot record that locks are held: {e}; ENOLCK");
                Err(FsError(libc::ENOLCK))
            }
        }
    }
}

/// Create `path` and make its name durable (a machine crash right after a
/// grant must not lose it).
fn write_synced(path: &Path) -> std::io::Result<()> {
    std::fs::File::create(path)?.sync_all()?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
