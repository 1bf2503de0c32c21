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

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use xlator::FsResult;

/// How long an open waits before it is sent (a release before then
/// cancels it).
pub const OPEN_DELAY: Duration = Duration::from_millis(5);

/// An open on its way: its task (true once sent and answered, false if
/// cancelled before it was sent) and what cancels it.
struct Pending {
    task: JoinHandle<FsResult<bool>>,
    cancel: oneshot::Sender<()>,
}

/// Open handles whose OPEN is still on its way (or whose outcome the
/// release has not collected yet).
#[derive(Default)]
pub struct Opens {
    pending: Mutex<HashMap<u64, Pending>>,
}

impl Opens {
    /// Send the open for handle `fh` in the background, unless its release
    /// comes within [`OPEN_DELAY`].
    pub fn start(&self, rt: &tokio::runtime::Handle, fh: u64, open: impl Future<Output = FsResult<()>> + Send + 'static) {
        let (cancel, cancelled) = oneshot::channel::<()>();
        let task = rt.spawn(async move {
            tokio::select! {
                biased;
                _ = cancelled => return Ok(false),
                _ = tokio::time::sleep(OPEN_DELAY) => {}
            }
            open.await.map(|()| true)
        });
        self.pending.lock().unwrap().insert(fh, Pending { task, cancel });
    }

    /// Whether handle `fh`'s open reached the servers (so a release is
    /// owed); an open not sent yet is cancelled. A handle opened
    /// synchronously was never recorded: it did.
    pub async fn landed(&self, fh: u64) -> bool {
        let Some(p) = self.pending.lock().unwrap().remove(&fh) else { return true };
        let _ = p.cancel.send(());
        match p.task.await {
            Ok(Ok(sent)) => sent,
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
}
