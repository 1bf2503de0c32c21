//! Directory attributes fetched ahead after a change here, when the
//! change's answer did not carry them or they could not be kept (see
//! `Coherence::added`), and the kernel's GETATTR that arrives while such a
//! fetch is under way: it waits for that answer instead of asking the
//! servers a second time (before, a sequential `mv` or `rm` loop sent two
//! getattrs of its directory per name: the one ahead and the kernel's).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
pub struct DirsAhead {
    /// the latest fetch under way per directory inode
    under_way: Mutex<HashMap<u64, Arc<Notify>>>,
}

/// A fetch under way; dropping it (the answer is remembered or failed)
/// wakes who waits for it.
pub struct Fetching {
    of: Arc<DirsAhead>,
    ino: u64,
    done: Arc<Notify>,
}

impl DirsAhead {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Notify>>> {
        self.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fetch of `ino`'s attributes starts (it replaces one under way:
    /// that one may predate the latest change).
    pub fn start(self: &Arc<Self>, ino: u64) -> Fetching {
        let done = Arc::new(Notify::new());
        self.map().insert(ino, done.clone());
        Fetching { of: self.clone(), ino, done }
    }

    /// Wait at most `within` for the fetch of `ino` under way; false if
    /// there was none.
    pub async fn wait(&self, ino: u64, within: Duration) -> bool {
        let Some(done) = self.map().get(&ino).cloned() else { return false };
        let woken = done.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // (it may have ended between the look and the enable)
        if !self.map().get(&ino).is_some_and(|d| Arc::ptr_eq(d, &done)) {
            return true;
        }
        let _ = tokio::time::timeout(within, woken).await;
        true
    }
}

impl Drop for Fetching {
    fn drop(&mut self) {
        let mut m = self.of.map();
        if m.get(&self.ino).is_some_and(|d| Arc::ptr_eq(d, &self.done)) {
            m.remove(&self.ino);
        }
        drop(m);
        self.done.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_getattr_waits_for_the_fetch_under_way_and_only_for_it() {
        let d = Arc::new(DirsAhead::default());
        assert!(!d.wait(7, Duration::from_secs(5)).await, "nothing under way: no wait");
        let f = d.start(7);
        let d2 = d.clone();
        let waiter = tokio::spawn(async move { d2.wait(7, Duration::from_secs(30)).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(f);
        assert!(tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap(), "woken when it ended");
        assert!(d.map().is_empty());
        // an older fetch ending leaves the newer one's record
        let old = d.start(8);
        let new = d.start(8);
        drop(old);
        assert!(d.map().contains_key(&8));
        drop(new);
        assert!(d.map().is_empty());
    }
}
