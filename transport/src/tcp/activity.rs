//! What the server knows about one established connection without asking
//! its tasks: when bytes last moved each way, what it holds, and a way to
//! tell it to close. The sweeper (idle and stall rules) and the slot
//! eviction read it; the connection's reader, handlers and writer keep it
//! current with plain atomics.

use super::stats::Close;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Debug)]
pub(super) struct Activity {
    base: Instant,
    /// ms after `base` that the last byte arrived
    last_rx: AtomicU64,
    /// ms after `base` that the writer last moved bytes, or got work while idle
    last_tx: AtomicU64,
    /// requests received whose reply is not yet written
    pub in_flight: AtomicUsize,
    /// replies queued for the writer or being written
    pub unsent: AtomicUsize,
    /// the reader holds part of a frame
    pub partial: AtomicBool,
    /// the reader waits for memory budget (our doing, not the peer's)
    pub waiting: AtomicBool,
    close: watch::Sender<Option<Close>>,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            base: Instant::now(),
            last_rx: AtomicU64::new(0),
            last_tx: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            unsent: AtomicUsize::new(0),
            partial: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            close: watch::Sender::new(None),
        })
    }

    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    pub fn received(&self) {
        self.last_rx.store(self.now_ms(), Relaxed);
    }

    pub fn sent(&self) {
        self.last_tx.store(self.now_ms(), Relaxed);
    }

    /// How long since a byte arrived.
    pub fn quiet_rx(&self, now: Instant) -> Duration {
        since(self.base, now, self.last_rx.load(Relaxed))
    }

    /// How long since the writer moved a byte (or got work while idle).
    pub fn quiet_tx(&self, now: Instant) -> Duration {
        since(self.base, now, self.last_tx.load(Relaxed))
    }

    /// Nothing in flight, nothing half-read, nothing to write.
    pub fn is_idle(&self) -> bool {
        self.in_flight.load(Relaxed) == 0
            && self.unsent.load(Relaxed) == 0
            && !self.partial.load(Relaxed)
            && !self.waiting.load(Relaxed)
    }

    /// Marks the connection as waiting for memory budget until dropped
    /// (a wait that is our doing, not the peer's).
    pub fn waiting_for_budget(&self) -> Waiting<'_> {
        self.waiting.store(true, Relaxed);
        Waiting(self)
    }

    /// How long since anything moved either way: a client counts its
    /// connection's quiet time from its last call or reply, so the server
    /// must not count from its last request alone (a slow reply restarts it).
    pub fn quiet(&self, now: Instant) -> Duration {
        self.quiet_rx(now).min(self.quiet_tx(now))
    }

    /// A reply joins the writer's queue.
    pub fn queue_reply(&self) {
        if self.unsent.fetch_add(1, Relaxed) == 0 {
            // a writer that had nothing to do has not been stalling
            self.sent();
        }
    }

    /// Ask the connection to close; only the first reason counts.
    /// Returns whether this call was the first.
    pub fn close(&self, why: Close) -> bool {
        self.close.send_if_modified(|r| {
            let first = r.is_none();
            if first {
                *r = Some(why);
            }
            first
        })
    }

    pub fn closing(&self) -> Option<Close> {
        *self.close.borrow()
    }

    /// Resolves with the reason once [`close`](Self::close) was called.
    pub async fn closed(&self) -> Close {
        let mut rx = self.close.subscribe();
        let r = *rx.wait_for(|r| r.is_some()).await.expect("the sender lives in self");
        r.expect("waited for Some")
    }
}

pub(super) struct Waiting<'a>(&'a Activity);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.store(false, Relaxed);
    }
}

fn since(base: Instant, now: Instant, at_ms: u64) -> Duration {
    now.saturating_duration_since(base + Duration::from_millis(at_ms))
}

/// A write half that stamps [`Activity::sent`] whenever bytes leave.
pub(super) struct Progress<W> {
    pub inner: W,
    pub act: Arc<Activity>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Progress<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            if *n > 0 {
                self.act.sent();
            }
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
