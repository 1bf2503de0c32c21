//! The background heal: the names the index ([`crate::pending`]) holds are
//! healed once the servers answer again, without anyone running `imca heal`.
//!
//! ```text
//!  gateway start ──> run_healer (one task per gateway)
//!     idle ──(something recorded)──> wait `backoff` ──> a round:
//!        each recorded name: lookup on every server
//!           EIO and a server does not answer ──> stop the round, back off (×2, ≤ MAX_BACKOFF)
//!           (EIO with every server answering: a failed attempt, as below)
//!           agree ──> out of the index (done)
//!           disagree ──> heal_name (heal.rs) ──> nothing left: done
//!                                             a possible create under way: kept
//!                                             else a failed attempt; after MAX_ATTEMPTS given up (logged)
//!        index overflowed ──> a full sweep (walk.rs) from the root
//! ```
//!
//! The heal itself is the lookup's ([`Stripe::heal_name`]): server 0's
//! state wins, decided on a second look at it, so the healer racing users'
//! operations and other gateways' heals is as safe as two lookups meeting
//! the same name. It runs off the request path and one name at a time.

use crate::pending::Item;
use crate::Stripe;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use xlator::*;

/// The wait before the first round after something was recorded (the
/// servers just failed: give them a moment).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between rounds while something is left: a down server
/// costs one lookup this often.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Names looked at in one round.
const ROUND: usize = 1024;
/// Failed heals of one name (the servers answered, the repair did not
/// take) before it is given up and left to `imca heal`.
const MAX_ATTEMPTS: u32 = 10;

/// How a round ended.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    /// nothing left
    Clear,
    /// something healed, more left: the next round at once
    Progress,
    /// nothing healed (a server away, or only what must wait)
    Left,
}

impl Stripe {
    /// Heal what the index records until `stopped` resolves. The gateway
    /// spawns it once.
    pub async fn run_healer(self: Arc<Self>, stopped: impl Future<Output = ()>) {
        tokio::pin!(stopped);
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.pending.len() == 0 && !self.pending.sweep_owed() {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = self.pending.recorded() => backoff = FIRST_BACKOFF,
                }
            }
            tokio::select! {
                _ = &mut stopped => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = match self.heal_round().await {
                Round::Clear => FIRST_BACKOFF,
                Round::Progress => Duration::ZERO,
                Round::Left => (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF),
            };
        }
    }

    /// How many names wait for the background heal.
    pub fn pending_heals(&self) -> usize {
        self.pending.len()
    }

    /// Whether the index overflowed and a full sweep is owed.
    pub fn heal_sweep_owed(&self) -> bool {
        self.pending.sweep_owed()
    }

    /// One pass over the index (and the sweep, if owed).
    async fn heal_round(&self) -> Round {
        if self.pending.sweep_owed() && !self.sweep().await {
            return Round::Left;
        }
        let mut progress = false;
        for it in self.pending.snapshot(ROUND) {
            let all = self.on_all(|s| s.lookup(&it.parent, &it.name)).await;
            if all.iter().any(|r| matches!(r, Err(FsError::EIO))) {
                if !self.all_answer().await {
                    // A server is still away: every other name would wait too.
                    return if progress { Round::Progress } else { Round::Left };
                }
                // Every server answers, but not for this name: its own trouble.
                self.heal_failed(&it);
                continue;
            }
            if !crate::heal::disagree(&all) {
                self.healed(&it);
                progress = true;
                continue;
            }
            let r = self.heal_name(&it.parent, &it.name, &all[1..]).await;
            if r.left == 0 {
                self.healed(&it);
                progress = true;
            } else if r.young < r.left {
                self.heal_failed(&it);
            }
            // (only possible creates under way left: kept, not a failure)
        }
        match (self.pending.len(), progress) {
            (0, _) => Round::Clear,
            (_, true) => Round::Progress,
            (_, false) => Round::Left,
        }
    }

    /// The full sweep the overflowed index owes (the walk `imca heal`
    /// runs, from the root), once every server answers. True: done. The
    /// names still in the index are looked at after it (they agree then,
    /// unless changed since: quick).
    async fn sweep(&self) -> bool {
        if !self.all_answer().await {
            return false;
        }
        let root = Loc::root();
        tracing::warn!("stripe heal: the heal index overflowed; sweeping the whole volume");
        let r = self.heal_tree(&root).await;
        if r.left > 0 {
            tracing::warn!(left = r.left, "stripe heal: the sweep left disagreements; it runs again");
            return false;
        }
        self.pending.sweep_done();
        tracing::info!(checked = r.checked, repaired = r.repaired, "stripe heal: the sweep is done; the servers agree");
        true
    }

    /// Does every server answer (a getattr of the root)?
    async fn all_answer(&self) -> bool {
        let root = Loc::root();
        self.on_all(|s| s.getattr(&root)).await.iter().all(|r| r.is_ok())
    }

    fn healed(&self, it: &Item) {
        self.pending.healed(it);
        self.pending.metrics.heals.with_label_values(&["done"]).inc();
        tracing::info!(path = %it.parent.child(&it.name).path, "stripe heal: a recorded divergence is healed");
    }

    fn heal_failed(&self, it: &Item) {
        self.pending.metrics.heals.with_label_values(&["failed"]).inc();
        if self.pending.failed(it) >= MAX_ATTEMPTS {
            self.pending.healed(it);
            self.pending.metrics.heals.with_label_values(&["given_up"]).inc();
            tracing::error!(
                path = %it.parent.child(&it.name).path,
                "stripe heal: a recorded divergence still differs after {MAX_ATTEMPTS} heals; given up (run `imca heal`)"
            );
        }
    }
}
