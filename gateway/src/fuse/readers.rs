//! How many fuser threads wait on `/dev/fuse` at once: one, unless
//! requests are queueing.
//!
//! Every fuser thread reads its requests from the same kernel queue, and
//! the kernel hands each request to the thread that has waited longest.
//! With two threads waiting, one process's requests in a row alternate
//! between them, and each lands on a thread last run elsewhere: measured
//! here (2 CPUs), a first stat pass through one process ran at half the
//! rate of a single fuser thread, with 400 CPU migrations per 2,000
//! requests (docs/benchmarks/archive/issue-12-kernel-caching.md, "One reader at a time"). libfuse has the
//! same shape (it only adds a thread when none is idle); bindfs runs one.
//!
//! So a thread that finishes a request while another thread already waits
//! in `read` parks here instead of reading. A request that arrives while
//! no thread waits, and finds more requests queued behind it, unparks one:
//! concurrent processes still get every thread. Looking costs a `poll` of
//! the device, a third system call beside the request's `read` and
//! `writev`, so after a look that found no queue a lone reading thread
//! skips the next [`LOOK_EVERY`] − 1 looks (one process's requests never
//! queue); after one that found a queue it looks at every request again.
//! Parked threads look again every [`RECHECK`] (a stuck request, or a
//! connection that ended), so none is left behind when the mount goes away.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long a parked thread sleeps before it looks at the queue itself.
const RECHECK: Duration = Duration::from_millis(200);

/// How many requests a lone reading thread starts, while others are
/// parked, per look at the queue once a look found none. A memo-answered
/// request takes a few µs on its thread, and one that goes to the network
/// is handed to the runtime at its first wait (`first_poll`), so a queue
/// seen 8 requests late has waited some tens of µs; a `poll` on every
/// request cost about 5 % of the gateway's CPU per memo-answered LOOKUP
/// (docs/benchmarks/archive/issue-12-kernel-caching.md, "The first stat pass: a look at the queue every 8
/// requests").
const LOOK_EVERY: u32 = 8;

/// How long after a request last found others queued every thread keeps
/// reading: concurrent processes come in waves, and parking a thread at
/// every gap between them costs a wake-up each time (4 processes statting:
/// 84k/s parking at once, against 109k/s never parking). Only a queue
/// renews it: two threads reading, one process's requests would overlap
/// on their way in and out and keep both reading for good.
const LINGER: Duration = Duration::from_millis(10);

#[derive(Default)]
struct State {
    /// threads between a request's start and its end
    busy: usize,
    /// threads parked here
    parked: usize,
    /// unparks owed to parked threads
    tokens: usize,
    /// the session is over: nobody parks again
    closed: bool,
    /// when a request last found another queued behind it
    queued_at: Option<Instant>,
    /// looks to skip before the next (see the module doc)
    skip: u32,
}

pub struct Readers {
    threads: usize,
    state: Mutex<State>,
    wake: Condvar,
    /// a duplicate of the session's `/dev/fuse`, to see whether requests queue
    fuse: OnceLock<OwnedFd>,
}

/// One request's time on a fuser thread; its end may park the thread.
pub struct Turn<'a>(&'a Readers);

impl Readers {
    pub fn new(threads: usize) -> Readers {
        Readers { threads: threads.max(1), state: Mutex::default(), wake: Condvar::new(), fuse: OnceLock::new() }
    }

    /// The session's device, once mounted (before its threads start).
    pub fn watch(&self, fuse: OwnedFd) {
        let _ = self.fuse.set(fuse);
    }

    /// Wake every parked thread for good: the session is ending.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// A fuser thread starts a request.
    pub fn enter(&self) -> Turn<'_> {
        let mut s = self.lock();
        s.busy += 1;
        if self.waiting(&s) == 0 && s.parked > s.tokens {
            if s.skip > 0 {
                s.skip -= 1;
            } else {
                drop(s);
                if self.queued() {
                    self.unpark_one();
                } else {
                    self.lock().skip = LOOK_EVERY - 1;
                }
            }
        }
        Turn(self)
    }

    /// Threads that are neither busy nor parked: waiting in `read`, or on
    /// their way there.
    fn waiting(&self, s: &State) -> usize {
        self.threads.saturating_sub(s.busy + s.parked - s.tokens.min(s.parked))
    }

    fn unpark_one(&self) {
        let mut s = self.lock();
        s.queued_at = Some(Instant::now());
        if s.parked > s.tokens {
            s.tokens += 1;
            self.wake.notify_one();
        }
    }

    /// Requests are waiting in the kernel's queue, or the connection is
    /// gone (reading would fail at once): either way, a thread should read.
    fn queued(&self) -> bool {
        let Some(fd) = self.fuse.get() else { return false };
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents != 0
    }

    /// A fuser thread finished a request: park it while another waits.
    fn leave(&self) {
        let mut s = self.lock();
        s.busy -= 1;
        // `waiting` counts this thread too
        if s.closed || self.waiting(&s) < 2 || s.queued_at.is_some_and(|t| t.elapsed() < LINGER) {
            return;
        }
        s.parked += 1;
        loop {
            let (next, timeout) = self.wake.wait_timeout(s, RECHECK).unwrap_or_else(|p| p.into_inner());
            s = next;
            if s.tokens > 0 {
                s.tokens -= 1;
                break;
            }
            if s.closed {
                break;
            }
            if timeout.timed_out() {
                drop(s);
                let go = self.queued();
                s = self.lock();
                if go {
                    break;
                }
            }
        }
        s.parked -= 1;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;
    use std::sync::Arc;

    #[test]
    fn a_thread_parks_only_while_another_waits() {
        let r = Arc::new(Readers::new(2));
        // both waiting; one takes a request and finishes it: it parks
        let r2 = r.clone();
        let t = std::thread::spawn(move || drop(r2.enter()));
        while r.lock().parked == 0 {
            std::thread::yield_now();
        }
        // the other takes a request: no device to see a queue, nobody unparks;
        // finishing it leaves it reading, since the first is parked
        drop(r.enter());
        assert_eq!(r.lock().parked, 1);
        r.close();
        t.join().unwrap();
        assert_eq!(r.lock().parked, 0);
    }

    #[test]
    fn a_request_that_finds_others_queued_unparks_a_thread() {
        let r = Arc::new(Readers::new(2));
        let (rx, tx) = pipe();
        r.watch(rx);
        let r2 = r.clone();
        let t = std::thread::spawn(move || drop(r2.enter()));
        while r.lock().parked == 0 {
            std::thread::yield_now();
        }
        // nothing queued: the parked thread stays parked, however often
        // the reading thread looks
        for _ in 0..2 * LOOK_EVERY {
            drop(r.enter());
            assert_eq!(r.lock().tokens, 0);
        }
        // a second request queued behind this one: the parked thread reads,
        // at the latest when the reading thread next looks
        std::io::Write::write_all(&mut std::fs::File::from(tx), b"x").unwrap();
        let mut turn = r.enter();
        for _ in 1..LOOK_EVERY {
            if r.lock().tokens > 0 || t.is_finished() {
                break;
            }
            drop(turn);
            turn = r.enter();
        }
        t.join().unwrap();
        let s = r.lock();
        assert_eq!((s.parked, s.tokens), (0, 0));
        drop(s);
        r.close(); // the other thread is gone: do not park waiting for it
        drop(turn);
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: a two-int array for pipe(2) to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both fds are new and owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_lone_thread_never_parks() {
        let r = Readers::new(1);
        drop(r.enter());
        assert_eq!(r.lock().parked, 0);
    }
}
