//! Memory budgets of a TCP server: every byte a connection holds on a
//! client's behalf is reserved before it is read or produced.
//!
//! ```text
//!  request frame:  header read ─ reserve(frame len) ─ body read ─ handled ─ released
//!  its reply:      reserve(service's size hint) ─ handled ─ trued to the real size ─ written ─ released
//! ```
//!
//! A reservation takes bytes from the connection's own [`Budget`] first and
//! then from the server-wide [`Pool`] (always in that order, so two
//! reservations never wait on each other crosswise). Both are FIFO
//! semaphores of bytes. The pool keeps a quarter apart for small
//! reservations (up to [`SMALL`]: metadata, small reads and writes), so a
//! crowd of large frames that never finish can hold up other large
//! transfers until the stall rule closes them, but never a `stat`. The connection's reader waits for them, which is
//! the back-pressure: while a client leaves its replies unread, or sends
//! frames slowly, the bytes it holds stay reserved and the server stops
//! reading from it — the rest of its pipeline waits in its socket buffer.
//! Every holder makes progress on its own peer's behaviour alone (a frame
//! completes when its sender sends, a reply is released when its receiver
//! reads), so budgets cannot deadlock; a peer that stops is closed by the
//! server's stall rule, which gives its bytes back.
//!
//! A single request larger than a cap takes the whole cap (it waits until
//! it is alone) rather than being refused. A reply that comes out larger
//! than its reservation grows it without waiting: if no budget is left the
//! extra is counted as overdraft (the memory exists already, waiting would
//! only risk two growing replies waiting on each other).

use super::stats::ServerStats;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Reservations up to this size draw on the pool's small share.
pub const SMALL: usize = 128 * 1024;

/// The bytes all connections of one server may hold together.
#[derive(Debug)]
pub struct Pool {
    /// (semaphore, cap) for reservations up to [`SMALL`], and above it
    small: (Arc<Semaphore>, usize),
    large: (Arc<Semaphore>, usize),
    stats: Arc<ServerStats>,
}

impl Pool {
    pub fn new(cap: usize, stats: Arc<ServerStats>) -> Arc<Pool> {
        let small = clamp(cap / 4);
        let large = clamp(cap - cap / 4);
        let share = |n| (Arc::new(Semaphore::new(n)), n);
        Arc::new(Pool { small: share(small), large: share(large), stats })
    }

    fn share(&self, small: bool) -> &(Arc<Semaphore>, usize) {
        if small {
            &self.small
        } else {
            &self.large
        }
    }
}

/// One connection's budget, drawing on the server's pool.
#[derive(Clone, Debug)]
pub struct Budget {
    conn: Arc<Semaphore>,
    conn_cap: usize,
    pool: Arc<Pool>,
}

/// Permits are counted in `u32`s per acquisition; a cap above that is no
/// limit worth having anyway.
fn clamp(cap: usize) -> usize {
    cap.clamp(1, u32::MAX as usize)
}

impl Budget {
    pub fn new(pool: Arc<Pool>, conn_cap: usize) -> Budget {
        let conn_cap = clamp(conn_cap);
        Budget { conn: Arc::new(Semaphore::new(conn_cap)), conn_cap, pool }
    }

    /// Wait until `n` bytes (at most a whole cap) are free, and hold them.
    /// Cancel-safe: a cancelled wait holds nothing.
    pub async fn reserve(&self, n: usize) -> Reservation {
        let conn = self.conn.clone().acquire_many_owned(n.min(self.conn_cap) as u32).await;
        let conn = conn.expect("budget semaphores are never closed");
        let small = n <= SMALL;
        let (sem, cap) = self.pool.share(small);
        let pool = sem.clone().acquire_many_owned(n.min(*cap) as u32).await;
        let pool = pool.expect("budget semaphores are never closed");
        self.pool.stats.add_buffered(n);
        Reservation { bytes: n, conn: Some(conn), pool: Some(pool), budget: Some(self.clone()), small }
    }
}

/// Bytes held until dropped (`default()` holds none: a client's frames).
#[derive(Debug, Default)]
pub struct Reservation {
    bytes: usize,
    conn: Option<OwnedSemaphorePermit>,
    pool: Option<OwnedSemaphorePermit>,
    budget: Option<Budget>,
    /// drawn on the pool's small share
    small: bool,
}

impl Reservation {
    /// Hold `n` bytes instead: shrinking gives bytes back, growing takes
    /// what is free without waiting (see the module page: overdraft).
    pub fn resize(&mut self, n: usize) {
        let Some(b) = self.budget.clone() else {
            self.bytes = n;
            return;
        };
        let short_c = adjust(&mut self.conn, &b.conn, n.min(b.conn_cap));
        let (sem, cap) = b.pool.share(self.small);
        let short_p = adjust(&mut self.pool, sem, n.min(*cap));
        let stats = &b.pool.stats;
        if n > self.bytes {
            stats.add_buffered(n - self.bytes);
        } else {
            stats.sub_buffered(self.bytes - n);
        }
        let short = short_c.max(short_p);
        if short > 0 {
            stats.overdraft.fetch_add(short as u64, std::sync::atomic::Ordering::Relaxed);
        }
        self.bytes = n;
    }
}

/// Bring `permit` to `want` permits of `sem`; returns how many it could not get.
fn adjust(permit: &mut Option<OwnedSemaphorePermit>, sem: &Arc<Semaphore>, want: usize) -> usize {
    let have = permit.as_ref().map_or(0, |p| p.num_permits());
    if have > want {
        if let Some(p) = permit.as_mut() {
            drop(p.split(have - want));
        }
        return 0;
    }
    if have == want {
        return 0;
    }
    match sem.clone().try_acquire_many_owned((want - have) as u32) {
        Ok(more) => {
            match permit.as_mut() {
                Some(p) => p.merge(more),
                None => *permit = Some(more),
            }
            0
        }
        Err(_) => want - have,
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.pool.stats.sub_buffered(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_wait_for_both_caps_and_resize_without_waiting() {
        const K: usize = 1024;
        let stats = Arc::new(ServerStats::default());
        let pool = Pool::new(400 * K, stats.clone()); // small share 100 K, large 300 K
        let (a, b) = (Budget::new(pool.clone(), 60 * K), Budget::new(pool.clone(), 60 * K));
        let waits = |f| async { tokio::time::timeout(Duration::from_millis(50), f).await.is_err() };
        let r1 = a.reserve(50 * K).await;
        assert!(waits(a.reserve(20 * K)).await, "the connection's own cap: 50 + 20 > 60");
        let r2 = b.reserve(40 * K).await;
        assert!(waits(b.reserve(20 * K)).await, "the pool's small share: 50 + 40 + 20 > 100");
        assert_eq!(stats.buffered_bytes(), 90 * K);
        drop(r1);
        let r3 = b.reserve(20 * K).await;
        assert_eq!(stats.buffered_bytes(), 60 * K);
        drop((r2, r3));

        // Larger than every cap: takes them whole rather than being refused,
        // and leaves the small share alone.
        let big = a.reserve(1000 * K).await;
        assert!(waits(b.reserve(SMALL + 1)).await, "the large share is spent");
        let small = b.reserve(10 * K).await;
        assert_eq!(stats.buffered_bytes(), 1010 * K);
        drop((big, small));

        let mut r = b.reserve(10 * K).await;
        let hog = b.reserve(40 * K).await;
        r.resize(15 * K); // grows within the caps
        assert_eq!((stats.buffered_bytes(), stats.overdraft_bytes()), (55 * K, 0));
        r.resize(30 * K); // the connection has 5 K left, not 15 K: overdraft, no wait
        assert_eq!((stats.buffered_bytes(), stats.overdraft_bytes()), (70 * K, 15 * K as u64));
        r.resize(5 * K);
        drop(hog);
        let all = b.reserve(55 * K).await; // the shrink gave the bytes back
        drop((r, all));
        assert_eq!(stats.buffered_bytes(), 0);
        assert_eq!(stats.peak_buffered_bytes(), 1010 * K);
    }
}
