//! Graceful shutdown, the mini-redis way: one broadcast says "stop", and
//! completion is noticed by drop — every task holds a [`Shutdown`] token and
//! the [`Drain`] waits until no token is left.
//!
//! A `watch` channel carries the broadcast (unlike mini-redis' `broadcast`,
//! a token cloned after the stop still sees it), and an `mpsc` channel that
//! nobody sends on counts the tokens: its `recv` returns `None` once every
//! sender — one inside each token — is gone.

use std::future::Future;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The daemon's side: broadcasts the stop and waits for its tasks.
/// Dropping it without [`drain`](Drain::drain) also broadcasts the stop.
pub struct Drain {
    stop: watch::Sender<bool>,
    alive: mpsc::Sender<()>,
    done: mpsc::Receiver<()>,
}

/// A task's side: learn that the daemon is stopping, and (by being held)
/// keep the drain waiting until the task has finished its in-flight work.
#[derive(Clone)]
pub struct Shutdown {
    stop: watch::Receiver<bool>,
    _alive: mpsc::Sender<()>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain::new()
    }
}

impl Drain {
    pub fn new() -> Drain {
        let (stop, _) = watch::channel(false);
        let (alive, done) = mpsc::channel(1);
        Drain { stop, alive, done }
    }

    /// A token for one more task; the drain waits until it is dropped.
    pub fn token(&self) -> Shutdown {
        Shutdown { stop: self.stop.subscribe(), _alive: self.alive.clone() }
    }

    /// A future resolving at the stop, for work the drain need not wait for
    /// (a task that only watches, a server that drains on its own).
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.subscribe();
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    }

    /// Broadcast the stop without waiting (the tasks start finishing).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// Broadcast the stop, then wait until every token is dropped, at most
    /// `bound`. Returns whether every task finished in time; the ones that
    /// did not are left to whoever owns them (their runtime, usually).
    pub async fn drain(self, bound: Duration) -> bool {
        let Drain { stop, alive, mut done } = self;
        stop.send_replace(true);
        drop(alive);
        let finished = tokio::time::timeout(bound, done.recv()).await.is_ok();
        if !finished {
            tracing::warn!(?bound, "shutdown: some tasks did not finish in time");
        }
        finished
    }
}

impl Shutdown {
    /// Has the stop been broadcast?
    pub fn is_shutdown(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the stop is broadcast (or the [`Drain`] is dropped).
    pub async fn recv(&mut self) {
        let _ = self.stop.wait_for(|s| *s).await;
    }

    /// The same as a `'static` future for APIs that take a shutdown future
    /// (axum's graceful shutdown, `transport::tcp::serve`). It does not hold
    /// the token: keep the token in the task that runs the server, so the
    /// drain waits for the server's own drain too.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.clone();
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_waits_for_every_token() {
        let d = Drain::new();
        let (mut a, b) = (d.token(), d.token());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let t1 = tokio::spawn(async move {
            a.recv().await;
            tx.send("a stopped").unwrap();
            tokio::task::yield_now().await;
            drop(a);
        });
        let t2 = tokio::spawn(async move {
            b.stopped().await;
            assert!(b.is_shutdown());
            drop(b);
        });
        assert!(d.drain(Duration::from_secs(10)).await, "both tokens dropped");
        assert_eq!(rx.recv().await, Some("a stopped"));
        t1.await.unwrap();
        t2.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_task_costs_the_bound_only() {
        let d = Drain::new();
        let stuck = d.token();
        let t0 = tokio::time::Instant::now();
        assert!(!d.drain(Duration::from_secs(5)).await);
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
        drop(stuck);
    }

    #[tokio::test]
    async fn a_token_taken_after_the_stop_sees_it_and_dropping_the_drain_stops() {
        let d = Drain::new();
        d.stop();
        let mut late = d.token();
        late.recv().await;
        let d = Drain::new();
        let (mut t, watcher) = (d.token(), d.stopped());
        drop(d);
        t.recv().await;
        watcher.await;
    }

    #[tokio::test]
    async fn no_tokens_drains_at_once() {
        assert!(Drain::new().drain(Duration::from_secs(1)).await);
    }
}
