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
use tokio::task::JoinHandle;
use xlator::FsResult;

/// Open handles whose OPEN is still on its way (or whose outcome the
/// release has not collected yet).
#[derive(Default)]
pub struct Opens {
    pending: Mutex<HashMap<u64, JoinHandle<FsResult<()>>>>,
}

impl Opens {
    /// Send the open for handle `fh` in the background.
    pub fn start(&self, rt: &tokio::runtime::Handle, fh: u64, open: impl Future<Output = FsResult<()>> + Send + 'static) {
        let task = rt.spawn(open);
        self.pending.lock().unwrap().insert(fh, task);
    }

    /// Whether handle `fh`'s open reached the servers (so a release is
    /// owed). A handle opened synchronously was never recorded: it did.
    pub async fn landed(&self, fh: u64) -> bool {
        let task = self.pending.lock().unwrap().remove(&fh);
        match task {
            None => true,
            Some(t) => match t.await {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    tracing::debug!(fh, ?e, "background open failed; no release owed");
                    false
                }
                Err(e) => {
                    tracing::warn!(fh, %e, "background open task failed");
                    false
                }
            },
        }
    }
}
