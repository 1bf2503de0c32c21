//! Opens the application does not wait for.
//!
//! An OPEN changes nothing a reader could see: permissions are the kernel's
//! (`default_permissions`), `O_TRUNC` comes as a separate SETATTR (no
//! `FUSE_ATOMIC_O_TRUNC`) and creates are MKNOD. What the storage servers do
//! with it is count the file as open, so that a file unlinked through
//! another gateway keeps its data until the last release. So with kernel
//! caching on, OPEN is answered at once and its round trip to every server
//! goes on in the background: opening a file whose pages or blocks are
//! cached costs no network round trip.
//!
//! An open is not even sent for its first few milliseconds
//! ([`OPEN_DELAY`]): a file opened, read from the kernel's pages and closed
//! within them (the common small-file read) costs the servers nothing, its
//! release cancelling its open. That is safe for the same reason as not
//! waiting: a file removed meanwhile stays reachable by id for two kernel
//! leases (the storage servers' removal holds), far longer.
//!
//! The one order that matters is open before release (a release that
//! overtook its open would leave the count one too high, and an unlinked
//! file's space held for ever): a release waits for its open, and is not
//! sent when the open failed (a file unlinked elsewhere meanwhile, a server
//! down), since nothing was counted then. Reads and writes need not wait:
//! they find the file by id, and one that loses the race with an unlink
//! elsewhere gets the error a synchronous open would have got a moment
//! earlier.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use xlator::FsResult;

/// How long an open waits before it is sent (a release before then
/// cancels it).
pub const OPEN_DELAY: Duration = Duration::from_millis(5);

type OpenFuture = Pin<Box<dyn Future<Output = FsResult<()>> + Send + 'static>>;

/// An open on its way.
enum Pending {
    /// not sent yet: a release now cancels it
    Waiting(OpenFuture),
    /// sent; its answer says whether a release is owed
    Sent(JoinHandle<FsResult<()>>),
}

#[derive(Default)]
struct Queue {
    pending: HashMap<u64, Pending>,
    /// handles in the order their delay ends (a cancelled one is skipped)
    due: VecDeque<(Instant, u64)>,
}

/// Open handles whose OPEN is still on its way (or whose outcome the
/// release has not collected yet).
///
/// One sender task sends the opens whose delay ran out: a task and a timer
/// per open cost three thread wake-ups for every open and close, a third
/// of the gateway's time in an open+read+close loop (docs/benchmarks/archive/issue-12-kernel-caching.md,
/// "One reader at a time").
#[derive(Default)]
pub struct Opens {
    queue: Mutex<Queue>,
    /// a new open for a sender with nothing to wait for
    added: Notify,
    /// started with the first open (it needs the runtime)
    sender: OnceLock<()>,
}

impl Opens {
    /// Send the open for handle `fh` in the background, unless its release
    /// comes within [`OPEN_DELAY`].
    pub fn start(self: &Arc<Self>, rt: &tokio::runtime::Handle, fh: u64, open: impl Future<Output = FsResult<()>> + Send + 'static) {
        self.sender.get_or_init(|| {
            rt.spawn(send_due(self.clone(), rt.clone()));
        });
        let mut q = self.lock();
        let first = q.due.is_empty();
        q.pending.insert(fh, Pending::Waiting(Box::pin(open)));
        q.due.push_back((Instant::now() + OPEN_DELAY, fh));
        drop(q);
        if first {
            self.added.notify_one();
        }
    }

    /// Whether handle `fh`'s open reached the servers (so a release is
    /// owed); an open not sent yet is cancelled. A handle opened
    /// synchronously was never recorded: it did.
    pub async fn landed(&self, fh: u64) -> bool {
        let task = match self.lock().pending.remove(&fh) {
            None => return true,
            Some(Pending::Waiting(_)) => return false,
            Some(Pending::Sent(task)) => task,
        };
        match task.await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::debug!(fh, ?e, "background open failed; no release owed");
                false
            }
            Err(e) => {
                tracing::warn!(fh, %e, "background open task failed");
                false
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Send each open once its delay ran out, for as long as the gateway lives.
async fn send_due(opens: Arc<Opens>, rt: tokio::runtime::Handle) {
    loop {
        let added = opens.added.notified();
        tokio::pin!(added);
        // registered before the queue is read: an open added after this
        // wakes it
        added.as_mut().enable();
        let next = {
            let mut q = opens.lock();
            let now = Instant::now();
            while let Some(&(at, fh)) = q.due.front() {
                if at > now {
                    break;
                }
                q.due.pop_front();
                // absent: released (cancelled) before its time
                if matches!(q.pending.get(&fh), Some(Pending::Waiting(_))) {
                    if let Some(Pending::Waiting(open)) = q.pending.remove(&fh) {
                        q.pending.insert(fh, Pending::Sent(rt.spawn(open)));
                    }
                }
            }
            q.due.front().map(|&(at, _)| at)
        };
        match next {
            Some(at) => tokio::time::sleep_until(at).await,
            None => added.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn counting(sent: &Arc<AtomicUsize>, ok: bool) -> impl Future<Output = FsResult<()>> + Send + 'static {
        let sent = sent.clone();
        async move {
            sent.fetch_add(1, SeqCst);
            if ok { Ok(()) } else { Err(xlator::FsError::ENOENT) }
        }
    }

    #[tokio::test]
    async fn an_open_released_in_time_is_never_sent_and_owes_no_release() {
        let (opens, sent) = (Arc::new(Opens::default()), Arc::new(AtomicUsize::new(0)));
        let rt = tokio::runtime::Handle::current();
        opens.start(&rt, 1, counting(&sent, true));
        // one thread: the sender cannot run before the release takes it
        assert!(!opens.landed(1).await);
        tokio::time::sleep(OPEN_DELAY * 4).await;
        assert_eq!(sent.load(SeqCst), 0);
    }

    #[tokio::test]
    async fn opens_past_their_delay_are_sent_and_their_outcome_decides_the_release() {
        let (opens, sent) = (Arc::new(Opens::default()), Arc::new(AtomicUsize::new(0)));
        let rt = tokio::runtime::Handle::current();
        opens.start(&rt, 1, counting(&sent, true));
        opens.start(&rt, 2, counting(&sent, false));
        tokio::time::sleep(OPEN_DELAY * 2).await;
        assert_eq!(sent.load(SeqCst), 2);
        assert!(opens.landed(1).await, "a sent open owes its release");
        assert!(!opens.landed(2).await, "a failed open owes none");
        // a handle never recorded (opened synchronously) did land
        assert!(opens.landed(3).await);
        // the sender waits for the next open after an idle spell
        tokio::time::sleep(OPEN_DELAY * 10).await;
        opens.start(&rt, 4, counting(&sent, true));
        tokio::time::sleep(OPEN_DELAY * 2).await;
        assert_eq!(sent.load(SeqCst), 3);
        assert!(opens.landed(4).await);
    }
}
