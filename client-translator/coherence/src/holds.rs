//! What this gateway told the storage servers its kernel may cache: the
//! gateway's side of holds (the servers' side is `upcall::leases`).
//!
//! ```text
//!  an answer about inode i, not held ── want(i) ──> registrar: Hold{batch} to every server
//!    (TTL 0; the memo does not answer)               <── Held{seq} from each
//!                                                    wait until the poll loops applied each seq
//!                                                ──> held(i): TTLs and memo answers for i
//! ```
//!
//! A server waits for this gateway only on changes of inodes it holds
//! there. A change made before a server recorded the hold was queued for
//! this gateway with no one waiting, and reaches it at its next poll;
//! until it is applied, what the memo keeps of the inode may predate it.
//! Once the poll loops applied up to each server's `seq`, the memo has
//! dropped whatever such a change made stale (or refused to keep it, its
//! epoch having moved), and every later change waits for this gateway. A
//! created object needs no round: the servers record it from the create
//! itself, before the object exists ([`Holds::made`]).
//!
//! A server that forgot the session (a restart, or an expired session it
//! dropped) forgot its holds: [`Holds::forgotten`] drops them all (the
//! same upcall drops the kernel's caches). A server bounds its record and past it
//! waits for this gateway on every change, which it says (`everything`);
//! this side stops asking past [`MAX_HELD`].
//!
//! **Giving back.** Once the kernel forgot an inode, [`Holds::release`]
//! stops counting it held (no TTL, no memo answer), the kernel is told to
//! drop it once more (an answer that saw it held just before may reach the
//! kernel after the FORGET: its attributes are then ignored, the kernel
//! having seen an invalidation since the request was sent), and only then
//! the servers hear `Unhold`. A want meanwhile cancels a give-back not yet
//! sent; one under way is followed by the hold, in order (one task sends
//! both, the give-back first).

use protocol_client::ProtocolClient;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// Inodes held before this gateway stops asking for more.
pub const MAX_HELD: usize = 1 << 21;
/// How long a round waits for the poll loops to apply what came before it
/// (a server that does not answer polls grants no lease either).
const APPLIED_WITHIN: Duration = Duration::from_secs(2);
/// After a failed round (a server down or restarting), the next waits this.
const RETRY: Duration = Duration::from_millis(50);
/// How long give-backs gather before they are sent, unless a hold is
/// wanted first: the kernel forgets one inode per removed name, and a
/// round per name cost every server a request per `rm`. Nothing waits on
/// a give-back (a server only keeps waiting for this gateway's prompt
/// acknowledgement on what it still counts held).
const GIVE_BACK_GATHER: Duration = Duration::from_millis(20);

pub struct Holds {
    /// held on every server
    held: RwLock<HashSet<u64>>,
    /// per server: it waits for this gateway on every change
    everything: Vec<AtomicBool>,
    wanted: Mutex<Wanted>,
    /// moves when a server forgot the session (under `held`'s lock): what
    /// a round or a create under way then learned does not count
    generation: AtomicU64,
    /// per server: the seq of the last invalidations applied
    applied: Vec<watch::Sender<u64>>,
    /// the registrar waits on this
    wake: Notify,
    /// a hold is wanted: give-backs gathering go at once
    wanted_now: Notify,
    /// counts finished rounds (waiters for a hold watch it)
    rounds: watch::Sender<u64>,
    /// `imca_gateway_holds`: inodes held on every server
    gauge: prometheus::IntGauge,
    /// `imca_gateway_hold_rounds_total{outcome="held|failed"}`
    outcomes: prometheus::IntCounterVec,
}

#[derive(Default)]
struct Wanted {
    /// the next round's
    next: Vec<u64>,
    /// in `next` or in the round under way
    asked: HashSet<u64>,
    /// to give back: the set says which of `giving` still are
    giving: Vec<u64>,
    give: HashSet<u64>,
}

/// What the registrar does with inodes before it gives them back: has the
/// kernel drop them.
pub type DropFromKernel = Box<dyn Fn(Vec<u64>) -> BoxFuture<'static, ()> + Send + Sync>;

impl Holds {
    pub fn new(servers: usize) -> Holds {
        let servers = servers.max(1);
        Holds {
            held: RwLock::default(),
            everything: (0..servers).map(|_| AtomicBool::new(false)).collect(),
            wanted: Mutex::default(),
            generation: AtomicU64::new(0),
            applied: (0..servers).map(|_| watch::Sender::new(0)).collect(),
            wake: Notify::new(),
            wanted_now: Notify::new(),
            rounds: watch::Sender::new(0),
            gauge: metric_series::gauge("imca_gateway_holds", "Inodes every storage server waits for this gateway on before acknowledging their change"),
            outcomes: metric_series::counter_vec("imca_gateway_hold_rounds_total", "Rounds of holds asked of the storage servers, by outcome", &["outcome"]),
        }
    }

    pub fn register(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        registry.register(Box::new(self.gauge.clone()))?;
        registry.register(Box::new(self.outcomes.clone()))
    }

    /// Whether every server waits for this gateway on changes of `ino`.
    pub fn held(&self, ino: u64) -> bool {
        self.everything.iter().all(|e| e.load(SeqCst)) || self.held.read().unwrap_or_else(|p| p.into_inner()).contains(&ino)
    }

    /// Whether all of `inos` are held; asks for those that are not.
    pub fn check(&self, inos: &[u64]) -> bool {
        let missing = self.missing(inos);
        for &ino in &missing {
            self.want(ino);
        }
        missing.is_empty()
    }

    /// Which of `inos` are not held (one look at the set: this is on the
    /// path of every answer).
    fn missing(&self, inos: &[u64]) -> Vec<u64> {
        if self.everything.iter().all(|e| e.load(SeqCst)) {
            return Vec::new();
        }
        let held = self.held.read().unwrap_or_else(|p| p.into_inner());
        inos.iter().copied().filter(|i| !held.contains(i)).collect()
    }

    /// Ask the servers to hold `ino` in the next round (unless held).
    pub fn want(&self, ino: u64) {
        {
            let held = self.held.read().unwrap_or_else(|p| p.into_inner());
            if held.len() >= MAX_HELD || held.contains(&ino) {
                return;
            }
        }
        let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        // (a give-back not sent yet is cancelled; the hold re-confirms it)
        w.give.remove(&ino);
        if w.asked.insert(ino) {
            w.next.push(ino);
            if w.next.len() == 1 {
                self.wake.notify_one();
                self.wanted_now.notify_one();
            }
        }
    }

    /// The kernel forgot `ino`: give its hold back.
    pub fn release(&self, ino: u64) {
        {
            let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
            if !held.remove(&ino) {
                return;
            }
            self.gauge.dec();
        }
        let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        // (a hold under way: it was wanted again, and will be held)
        if !w.asked.contains(&ino) && w.give.insert(ino) {
            w.giving.push(ino);
            self.wake.notify_one();
        }
    }

    /// Wait (at most `within`) until all of `inos` are held; false if a
    /// round for one failed or time ran out.
    pub async fn wait_held(&self, inos: &[u64], within: Duration) -> bool {
        let mut rounds = self.rounds.subscribe();
        let settled = async {
            loop {
                if self.check(inos) {
                    return true;
                }
                let _ = rounds.changed().await;
                // (a round ended: held now, or it failed; the set is read
                // before the wanted lock is taken, never under it)
                let missing = self.missing(inos);
                let w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
                if missing.iter().any(|i| !w.asked.contains(i)) {
                    return false;
                }
            }
        };
        tokio::time::timeout(within, settled).await.unwrap_or(false)
    }

    /// The generation now (taken when a create starts; see [`Holds::made`]).
    pub fn generation(&self) -> u64 {
        self.generation.load(SeqCst)
    }

    /// A create that started in generation `generation` made `ino`: every
    /// server recorded it from the create (unless one forgot the session
    /// since, which moved the generation).
    pub fn made(&self, generation: u64, ino: u64) {
        let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(SeqCst) == generation && held.len() < MAX_HELD && held.insert(ino) {
            self.gauge.inc();
        }
    }

    /// The poll loop of server `i` applied its invalidations up to `seq`.
    pub fn applied(&self, i: usize, seq: u64) {
        self.applied[i].send_replace(seq);
    }

    /// Server `i` did not know the session: it holds nothing for us.
    pub fn forgotten(&self, i: usize) {
        {
            let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
            self.generation.fetch_add(1, SeqCst);
            self.everything[i].store(false, SeqCst);
            held.clear();
            self.gauge.set(0);
        }
        let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        w.giving.clear();
        w.give.clear();
    }

    /// Give back what the kernel forgot and ask the servers for what is
    /// wanted, round after round, until `stop`.
    pub async fn run(self: Arc<Self>, servers: Vec<Arc<ProtocolClient>>, drop_from_kernel: DropFromKernel, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = self.wake.notified() => {}
            }
            if self.only_giving() {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::time::sleep(GIVE_BACK_GATHER) => {}
                    _ = self.wanted_now.notified() => {}
                }
            }
            loop {
                let (back, batch): (Vec<u64>, Vec<u64>) = {
                    let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
                    let n = w.giving.len().min(wire::MAX_HOLD);
                    let giving: Vec<u64> = w.giving.drain(..n).collect();
                    let back = giving.into_iter().filter(|i| w.give.remove(i)).collect();
                    let n = w.next.len().min(wire::MAX_HOLD);
                    (back, w.next.drain(..n).collect())
                };
                if !back.is_empty() {
                    tokio::select! {
                        _ = &mut stop => return,
                        _ = self.give_back(&servers, &drop_from_kernel, back) => {}
                    }
                }
                if batch.is_empty() {
                    if self.wanted.lock().unwrap_or_else(|p| p.into_inner()).giving.is_empty() {
                        break;
                    }
                    continue;
                }
                let ok = tokio::select! {
                    _ = &mut stop => return,
                    ok = self.round(&servers, &batch) => ok,
                };
                {
                    let mut w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
                    for ino in &batch {
                        w.asked.remove(ino);
                    }
                }
                self.rounds.send_modify(|n| *n += 1);
                self.outcomes.with_label_values(&[if ok { "held" } else { "failed" }]).inc();
                if !ok {
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }

    /// Whether give-backs are waiting and no hold is.
    fn only_giving(&self) -> bool {
        let w = self.wanted.lock().unwrap_or_else(|p| p.into_inner());
        w.next.is_empty() && !w.giving.is_empty() && w.giving.len() < wire::MAX_HOLD
    }

    /// The kernel drops `inos` (see the module page), then every server
    /// hears it need not wait for us on them. A server that does not
    /// answer keeps waiting for us: that costs writers, never coherence.
    async fn give_back(&self, servers: &[Arc<ProtocolClient>], drop_from_kernel: &DropFromKernel, inos: Vec<u64>) {
        drop_from_kernel(inos.clone()).await;
        let answers = futures::future::join_all(servers.iter().map(|s| s.unhold(inos.clone()))).await;
        for (s, a) in servers.iter().zip(answers) {
            if let Err(e) = a {
                tracing::debug!(server = %s.describe(), "unhold: {e:?}");
            }
        }
        self.outcomes.with_label_values(&["given_back"]).inc();
    }

    /// One round: every server records `batch`; once what was queued for
    /// us before is applied, it is held. False if it is not.
    async fn round(&self, servers: &[Arc<ProtocolClient>], batch: &[u64]) -> bool {
        let generation = self.generation();
        let answers = futures::future::join_all(servers.iter().map(|s| s.hold(batch.to_vec()))).await;
        let mut seqs = Vec::with_capacity(answers.len());
        for (s, a) in servers.iter().zip(answers) {
            match a {
                Ok(x) => seqs.push(x),
                Err(e) => {
                    tracing::debug!(server = %s.describe(), "hold: {e:?}");
                    return false;
                }
            }
        }
        let applied = futures::future::join_all(seqs.iter().enumerate().map(|(i, (seq, _))| {
            let mut rx = self.applied[i].subscribe();
            async move { tokio::time::timeout(APPLIED_WITHIN, rx.wait_for(|a| *a >= *seq)).await.is_ok_and(|r| r.is_ok()) }
        }))
        .await;
        if !applied.iter().all(|a| *a) {
            return false;
        }
        let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
        if self.generation.load(SeqCst) != generation {
            return false;
        }
        for (i, (_, everything)) in seqs.iter().enumerate() {
            if *everything {
                self.everything[i].store(true, SeqCst);
            }
        }
        held.extend(batch);
        self.gauge.set(held.len() as i64);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_counts_only_in_the_generation_it_started() {
        let h = Holds::new(2);
        let g = h.generation();
        h.made(g, 7);
        assert!(h.held(7));
        let g = h.generation();
        h.forgotten(1);
        h.made(g, 8);
        assert!(!h.held(7), "a server forgot the session: nothing is held");
        assert!(!h.held(8), "made before the server forgot");
    }

    #[test]
    fn a_give_back_not_yet_sent_is_cancelled_by_a_want() {
        let h = Holds::new(1);
        h.made(h.generation(), 7);
        h.release(7);
        assert!(!h.held(7), "not counted held once the kernel forgot it");
        assert_eq!(h.wanted.lock().unwrap().giving, vec![7]);
        h.want(7);
        let w = h.wanted.lock().unwrap();
        assert!(w.give.is_empty(), "the give-back is cancelled");
        assert_eq!(w.next, vec![7], "and the hold asked again");
        drop(w);
        h.release(8);
        assert!(h.wanted.lock().unwrap().give.is_empty(), "never held: nothing to give back");
    }

    #[tokio::test]
    async fn without_servers_answering_nothing_is_held() {
        let h = Holds::new(1);
        assert!(!h.check(&[5]));
        assert!(!h.wait_held(&[5], Duration::from_millis(20)).await, "no round ran");
        assert_eq!(h.wanted.lock().unwrap().next, vec![5], "asked once");
        h.want(5);
        assert_eq!(h.wanted.lock().unwrap().next, vec![5], "not twice");
    }
}
