//! Bank bypass episodes: from when a gateway's config lease ran out (it
//! bypasses the bank) to when it was renewed (the cache is back), logged at
//! both ends and counted, so an operator sees when, how often and for how
//! long a gateway ran without its cache (`imca ctl status`, the gateway's
//! `imca_gateway_bank_bypass*` metrics).

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// What [`crate::lease::ConfigLease::bypass`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bypass {
    /// how long the episode under way has lasted (`None`: the bank is used)
    pub current: Option<Duration>,
    /// episodes since the gateway started, the one under way included
    pub episodes: u64,
    /// time spent bypassing, the episode under way included
    pub total: Duration,
    /// time spent in the episodes that ended
    pub ended: Duration,
}

#[derive(Default)]
pub(crate) struct Episodes(Mutex<State>);

#[derive(Default)]
struct State {
    since: Option<Instant>,
    episodes: u64,
    ended: Duration,
}

impl Episodes {
    /// The lease ran out: an episode starts (unless one is under way).
    pub(crate) fn start(&self, epoch: u64) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if s.since.is_none() {
            s.since = Some(Instant::now());
            s.episodes += 1;
            tracing::warn!(epoch, episode = s.episodes, "volume config lease ran out (authority unreachable): bypassing the cache");
        }
    }

    /// The lease was renewed: the episode under way (if any) ends.
    pub(crate) fn end(&self, epoch: u64) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(since) = s.since.take() {
            let took = since.elapsed();
            s.ended += took;
            tracing::info!(epoch, episode = s.episodes, "volume config lease renewed: cache back after {:.1} s", took.as_secs_f64());
        }
    }

    pub(crate) fn snapshot(&self) -> Bypass {
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let current = s.since.map(|t| t.elapsed());
        Bypass { current, episodes: s.episodes, total: s.ended + current.unwrap_or_default(), ended: s.ended }
    }
}
