//! Which connections a server keeps when too many come: a cap in all, a cap
//! per [`Peer`], and shedding of connections that have not yet proven
//! themselves rather than refusing a newcomer.
//!
//! A connection is *unsettled* until it has shown it is a real client (the
//! admin API: a complete request head is in; the cache node with `-Y`: it
//! logged in) and settled after. Idle and trickling connections stay
//! unsettled, so they are what a flood is made of, and what goes first:
//!
//! ```text
//!  admit(peer) ─┬─ peer at its cap ──> shed the peer's own oldest unsettled, else refuse (PeerFull)
//!               ├─ server at its cap ─> shed the oldest unsettled of the peer holding the most, else refuse (Full)
//!               ├─ unsettled at their cap ─> the same shed
//!               └─> Ticket (dropped when the connection ends; `shed()` resolves if it is shed)
//!  reap(timeout): shed every connection unsettled for longer than timeout
//! ```
//!
//! Taking from the peer that holds the most means a flood from one user or
//! host sheds its own connections, and a real client's fresh one, which
//! settles within milliseconds, is not the one that goes. The registry is
//! a mutex over at most the server's cap of entries; it is touched at
//! accept, settle and close, never per request.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::peer::Peer;

/// The caps a [`Crowd`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrowdLimits {
    /// connections in all
    pub max: usize,
    /// connections of one peer
    pub per_peer: usize,
    /// unsettled connections in all
    pub max_unsettled: usize,
}

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// its peer holds its cap of connections, all settled
    PeerFull,
    /// the server holds its cap, all settled
    Full,
}

/// What a crowd has turned away, for stats and metrics.
#[derive(Default, Debug)]
pub struct CrowdCounts {
    /// unsettled connections closed to make room for a newcomer
    pub shed: AtomicU64,
    /// unsettled connections closed by [`Crowd::reap`] (too long unsettled)
    pub reaped: AtomicU64,
    /// refused: the peer's cap
    pub refused_peer: AtomicU64,
    /// refused: the server's cap
    pub refused_full: AtomicU64,
}

struct Member {
    peer: Peer,
    /// admitted, or unsettled again, at
    since: Instant,
    settled: bool,
    shed: Arc<Notify>,
}

#[derive(Default, Clone, Copy)]
struct Count {
    all: usize,
    unsettled: usize,
}

#[derive(Default)]
struct Inner {
    next: u64,
    members: BTreeMap<u64, Member>,
    peers: HashMap<Peer, Count>,
    unsettled: usize,
}

/// The connections a server holds, by peer.
pub struct Crowd {
    limits: CrowdLimits,
    inner: Mutex<Inner>,
    pub counts: CrowdCounts,
}

/// One admitted connection's place; the place is given back when it drops.
pub struct Ticket {
    crowd: Arc<Crowd>,
    id: u64,
    shed: Arc<Notify>,
}

impl Crowd {
    pub fn new(limits: CrowdLimits) -> Arc<Crowd> {
        Arc::new(Crowd { limits, inner: Mutex::default(), counts: CrowdCounts::default() })
    }

    pub fn limits(&self) -> CrowdLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admit a new, unsettled connection from `peer`, shedding an older
    /// unsettled one if a cap is reached (see the module doc).
    pub fn admit(self: &Arc<Self>, peer: Peer) -> Result<Ticket, Refused> {
        let mut g = self.lock();
        let l = self.limits;
        if g.peers.get(&peer).is_some_and(|c| c.all >= l.per_peer.max(1)) {
            if !self.shed_oldest(&mut g, Some(peer)) {
                self.counts.refused_peer.fetch_add(1, Ordering::Relaxed);
                return Err(Refused::PeerFull);
            }
            self.counts.shed.fetch_add(1, Ordering::Relaxed);
        }
        while g.members.len() >= l.max.max(1) || g.unsettled >= l.max_unsettled.max(1) {
            let most = g.peers.iter().filter(|(_, c)| c.unsettled > 0).max_by_key(|(_, c)| c.unsettled).map(|(p, _)| *p);
            if most.is_none() || !self.shed_oldest(&mut g, most) {
                self.counts.refused_full.fetch_add(1, Ordering::Relaxed);
                return Err(Refused::Full);
            }
            self.counts.shed.fetch_add(1, Ordering::Relaxed);
        }
        let id = g.next;
        g.next += 1;
        let shed = Arc::new(Notify::new());
        g.members.insert(id, Member { peer, since: Instant::now(), settled: false, shed: shed.clone() });
        let c = g.peers.entry(peer).or_default();
        c.all += 1;
        c.unsettled += 1;
        g.unsettled += 1;
        Ok(Ticket { crowd: self.clone(), id, shed })
    }

    /// Shed the oldest unsettled connection (of `peer`, if given); false if
    /// there is none.
    fn shed_oldest(&self, g: &mut Inner, peer: Option<Peer>) -> bool {
        let oldest = g
            .members
            .iter()
            .filter(|(_, m)| !m.settled && peer.is_none_or(|p| m.peer == p))
            .min_by_key(|(_, m)| m.since)
            .map(|(id, _)| *id);
        match oldest {
            Some(id) => {
                if let Some(m) = remove(g, id) {
                    m.shed.notify_one();
                }
                true
            }
            None => false,
        }
    }

    /// Shed every connection unsettled for `timeout` or longer; how many.
    pub fn reap(&self, timeout: Duration) -> usize {
        let mut g = self.lock();
        let now = Instant::now();
        let old: Vec<u64> =
            g.members.iter().filter(|(_, m)| !m.settled && now.duration_since(m.since) >= timeout).map(|(id, _)| *id).collect();
        for id in &old {
            if let Some(m) = remove(&mut g, *id) {
                m.shed.notify_one();
            }
        }
        self.counts.reaped.fetch_add(old.len() as u64, Ordering::Relaxed);
        old.len()
    }

    /// Connections held, and how many of them are unsettled.
    pub fn len(&self) -> (usize, usize) {
        let g = self.lock();
        (g.members.len(), g.unsettled)
    }

    /// False when the member is gone (shed just before).
    fn set_settled(&self, id: u64, settled: bool) -> bool {
        let mut g = self.lock();
        let Some(m) = g.members.get_mut(&id) else { return false };
        if m.settled == settled {
            return true;
        }
        m.settled = settled;
        m.since = Instant::now();
        let peer = m.peer;
        let c = g.peers.get_mut(&peer).expect("a member's peer is counted");
        if settled {
            c.unsettled -= 1;
            g.unsettled -= 1;
        } else {
            c.unsettled += 1;
            g.unsettled += 1;
        }
        true
    }
}

fn remove(g: &mut Inner, id: u64) -> Option<Member> {
    let m = g.members.remove(&id)?;
    let c = g.peers.get_mut(&m.peer).expect("a member's peer is counted");
    c.all -= 1;
    if !m.settled {
        c.unsettled -= 1;
        g.unsettled -= 1;
    }
    if c.all == 0 {
        g.peers.remove(&m.peer);
    }
    Some(m)
}

impl Ticket {
    /// Resolves once the crowd has shed this connection: close it then.
    /// Cancel-safe; a shed that came before the first poll is not lost.
    pub async fn shed(&self) {
        self.shed.notified().await
    }

    /// The connection proved itself: it is no longer shed or reaped. False
    /// if it was shed already (the owner closes it: it holds no place).
    pub fn settle(&self) -> bool {
        self.crowd.set_settled(self.id, true)
    }

    /// The connection went back to waiting (a kept-alive HTTP connection
    /// between requests): sheddable again, its age counted from now.
    pub fn unsettle(&self) {
        self.crowd.set_settled(self.id, false);
    }

    /// The crowd this place is in.
    pub fn crowd(&self) -> &Arc<Crowd> {
        &self.crowd
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut g = self.crowd.lock();
        remove(&mut g, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite_poll::now_or_never;

    /// A tiny stand-in for `FutureExt::now_or_never` (no futures dependency here).
    mod futures_lite_poll {
        pub fn now_or_never<F: std::future::Future>(f: F) -> Option<F::Output> {
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            let mut f = std::pin::pin!(f);
            match f.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            }
        }
    }

    fn uid(u: u32) -> Peer {
        Peer::Uid(u)
    }

    fn shed(t: &Ticket) -> bool {
        now_or_never(t.shed()).is_some()
    }

    #[test]
    fn a_flooding_peer_sheds_its_own_oldest_and_others_keep_theirs() {
        let c = Crowd::new(CrowdLimits { max: 4, per_peer: 3, max_unsettled: 4 });
        let op = c.admit(uid(0)).unwrap();
        let flood: Vec<Ticket> = (0..3).map(|_| c.admit(uid(1001)).unwrap()).collect();
        assert_eq!(c.len(), (4, 4));
        // the flooder's fourth sheds its own first, not the operator's
        let more = c.admit(uid(1001)).unwrap();
        assert!(shed(&flood[0]) && !shed(&flood[1]) && !shed(&op));
        // full: a newcomer from another peer sheds from the peer holding the most
        let other = c.admit(uid(2)).unwrap();
        assert!(shed(&flood[1]) && !shed(&op));
        assert_eq!(c.counts.shed.load(Ordering::Relaxed), 2);
        drop((flood, more, other));
        assert_eq!(c.len(), (1, 1));
    }

    #[test]
    fn settled_connections_are_never_shed_and_a_full_server_refuses() {
        let c = Crowd::new(CrowdLimits { max: 2, per_peer: 2, max_unsettled: 2 });
        let a = c.admit(uid(7)).unwrap();
        a.settle();
        let b = c.admit(uid(7)).unwrap();
        b.settle();
        assert_eq!(c.admit(uid(7)).err(), Some(Refused::PeerFull));
        assert_eq!(c.admit(uid(8)).err(), Some(Refused::Full));
        b.unsettle();
        let _n = c.admit(uid(8)).unwrap();
        assert!(shed(&b) && !shed(&a));
    }

    #[test]
    fn unsettled_ones_are_capped_apart_and_reaped() {
        let c = Crowd::new(CrowdLimits { max: 10, per_peer: 10, max_unsettled: 2 });
        let ts: Vec<Ticket> = (0..3).map(|_| c.admit(uid(1)).unwrap()).collect();
        assert!(shed(&ts[0]));
        ts[2].settle();
        assert_eq!(c.len(), (2, 1));
        assert_eq!(c.reap(Duration::ZERO), 1);
        assert!(shed(&ts[1]) && !shed(&ts[2]));
        assert_eq!(c.len(), (1, 0));
    }
}
