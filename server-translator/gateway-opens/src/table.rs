//! The table of the opens each gateway holds on this server: counted per
//! (session, file), bounded, and reaped once a gateway has been silent for
//! [`GRACE_LEASES`] leases (see the crate page for why).
//!
//! ```text
//!  open/create ok ──> OpenTable::opened(g, fid)      (admitted first: OpenTable::admit)
//!  release        ──> OpenTable::releasing(g, fid): counted? ──> below; not counted: answered here
//!  any request, once a lease: OpenTable::reap ── sessions silent for GRACE_LEASES ──> released below
//! ```

use upcall::Leases;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use wire::NO_SESSION;
use xlator::{FileId, FsError, FsResult};

/// Files one gateway may hold open on this server.
pub const MAX_PER_SESSION: usize = 1 << 20;
/// (gateway, file) pairs held open on this server.
pub const MAX_OPENS: usize = 1 << 22;
/// Leases a gateway stays silent before its opens go. Unlike a lock, an
/// open blocks nobody, so there is no hurry: a gateway starved of CPU for
/// a lease or two (its lease lapsed, its kernel dropped its caches) keeps
/// the files it holds open.
pub const GRACE_LEASES: u32 = 4;

#[derive(Default)]
struct State {
    /// per session: when it first opened here, and its opens by file
    sessions: HashMap<u64, (Instant, HashMap<FileId, u32>)>,
    /// (session, file) pairs in `sessions`
    total: usize,
    last_reap: Option<Instant>,
    /// the last request seen, and since when they came without a gap of a
    /// lease (live gateways poll every quarter lease)
    last_call: Option<Instant>,
    awake_since: Option<Instant>,
}

pub struct OpenTable {
    state: Mutex<State>,
    /// a session is gone once silent this long ([`GRACE_LEASES`])
    grace: Duration,
    /// `imca_storage_opens_reclaimed_total`
    reclaimed: prometheus::IntCounter,
}

impl OpenTable {
    pub fn new(lease: Duration, registry: &prometheus::Registry) -> OpenTable {
        let reclaimed = metric_series::counter("imca_storage_opens_reclaimed_total", "Opens released because their gateway's lease ran out");
        let _ = registry.register(Box::new(reclaimed.clone()));
        OpenTable { state: Mutex::default(), grace: lease * GRACE_LEASES, reclaimed }
    }

    /// Room for one more open of `fid` by `session`, before it is sent below.
    pub fn admit(&self, session: u64, fid: FileId) -> FsResult<()> {
        if session == NO_SESSION {
            return Ok(());
        }
        let st = self.lock();
        let (held, n) = st.sessions.get(&session).map_or((false, 0), |(_, files)| (files.contains_key(&fid), files.len()));
        if !held && (n >= MAX_PER_SESSION || st.total >= MAX_OPENS) {
            return Err(FsError(libc::EMFILE));
        }
        Ok(())
    }

    /// `session` opened `fid` (below answered the open or create).
    pub fn opened(&self, session: u64, fid: FileId) {
        if session == NO_SESSION {
            return;
        }
        let mut st = self.lock();
        let (_, files) = st.sessions.entry(session).or_insert_with(|| (Instant::now(), HashMap::new()));
        let n = files.entry(fid).or_insert(0);
        let new = *n == 0;
        *n = n.saturating_add(1);
        st.total += usize::from(new);
    }

    /// `session` releases `fid`: whether the release goes below (false: it
    /// holds no such open here any more, its lease ran out meanwhile).
    pub fn releasing(&self, session: u64, fid: FileId) -> bool {
        if session == NO_SESSION {
            return true;
        }
        let mut st = self.lock();
        let Some((_, files)) = st.sessions.get_mut(&session) else { return false };
        let Some(n) = files.get_mut(&fid) else { return false };
        *n -= 1;
        if *n == 0 {
            files.remove(&fid);
            if files.is_empty() {
                st.sessions.remove(&session);
            }
            st.total -= 1;
        }
        true
    }

    /// Now and then: the opens of sessions silent for [`GRACE_LEASES`]
    /// leases (or unknown to `live` for as long since their first open
    /// here), forgotten here; the caller releases each below (file, count).
    pub fn reap(&self, live: &Leases) -> Vec<(FileId, u32)> {
        let now = Instant::now();
        let lease = self.grace / GRACE_LEASES;
        let mut st = self.lock();
        // A lease without a single request: this server was frozen (or
        // idle), so no gateway could renew; silence says nothing until the
        // gateways had a grace to come back.
        if st.last_call.is_none_or(|t| now > t + lease) {
            st.awake_since = Some(now);
        }
        st.last_call = Some(now);
        if st.awake_since.is_some_and(|t| now < t + self.grace) || st.last_reap.is_some_and(|t| now < t + lease) {
            return Vec::new();
        }
        st.last_reap = Some(now);
        let grace = self.grace;
        let gone: Vec<u64> = st
            .sessions
            .iter()
            .filter(|(s, (since, _))| now >= *since + grace && live.silent_for(**s).unwrap_or(grace) >= grace)
            .map(|(s, _)| *s)
            .collect();
        let mut out = Vec::new();
        for s in gone {
            if let Some((_, files)) = st.sessions.remove(&s) {
                st.total -= files.len();
                tracing::info!(session = s, files = files.len(), "a gateway's lease ran out: releasing its opens");
                out.extend(files);
            }
        }
        self.reclaimed.inc_by(out.iter().map(|(_, n)| u64::from(*n)).sum());
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opens() -> OpenTable {
        OpenTable::new(Duration::from_millis(100), &prometheus::Registry::new())
    }

    #[test]
    fn releases_of_opens_not_held_here_stop_here() {
        let o = opens();
        let f = FileId(7);
        o.opened(1, f);
        o.opened(1, f);
        assert!(o.releasing(1, f));
        assert!(o.releasing(1, f));
        assert!(!o.releasing(1, f), "a third release takes another gateway's open");
        assert!(!o.releasing(2, f), "session 2 never opened it");
        assert!(o.releasing(NO_SESSION, f), "outside a session, as before");
        assert!(o.lock().sessions.is_empty());
        assert_eq!(o.lock().total, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_never_polled_loses_its_opens_after_its_grace() {
        let o = opens();
        let live = Leases::new(Duration::from_millis(100), &prometheus::Registry::new());
        o.opened(1, FileId(7));
        o.opened(1, FileId(7));
        o.opened(1, FileId(8));
        // requests (other gateways' polls) every 20 ms
        let mut got = Vec::new();
        let t0 = Instant::now();
        while got.is_empty() {
            got = o.reap(&live);
            assert!(got.is_empty() || t0.elapsed() >= Duration::from_millis(100 * u64::from(GRACE_LEASES)), "within its grace");
            tokio::time::advance(Duration::from_millis(20)).await;
        }
        got.sort();
        assert_eq!(got, vec![(FileId(7), 2), (FileId(8), 1)]);
        assert!(!o.releasing(1, FileId(7)), "released on its behalf already");
        assert_eq!(o.reclaimed.get(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_reaped_right_after_the_server_itself_was_frozen() {
        let o = opens();
        let live = Leases::new(Duration::from_millis(100), &prometheus::Registry::new());
        o.opened(1, FileId(7));
        assert!(o.reap(&live).is_empty());
        // frozen (SIGSTOP) for ten leases: the first request after it
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(o.reap(&live).is_empty(), "gateways had no chance to renew");
        tokio::time::advance(Duration::from_millis(20)).await;
        assert!(o.reap(&live).is_empty());
    }

    #[test]
    fn one_gateway_holds_a_bounded_number_of_files_open() {
        let o = opens();
        {
            let mut st = o.lock();
            st.sessions.insert(1, (Instant::now(), (0..MAX_PER_SESSION as u128).map(|i| (FileId(i), 1)).collect()));
            st.total = MAX_PER_SESSION;
        }
        assert_eq!(o.admit(1, FileId(u128::MAX)), Err(FsError(libc::EMFILE)));
        assert_eq!(o.admit(1, FileId(3)), Ok(()), "another open of a file it holds");
        assert_eq!(o.admit(2, FileId(u128::MAX)), Ok(()));
        o.lock().total = MAX_OPENS;
        assert_eq!(o.admit(2, FileId(u128::MAX)), Err(FsError(libc::EMFILE)), "nor all of them together");
    }
}
