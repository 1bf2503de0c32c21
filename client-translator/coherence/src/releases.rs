//! Releases sent behind the kernel's closes, gathered into one message per
//! server (as give-backs of holds are).
//!
//! The application's close never waited for a release: it only lets each
//! server drop its open of the file (free an unlinked file's space, put a
//! new file's blocks in the bank). Sent one by one it was a request per
//! file per server, a third of what a create with its write and close
//! costs the servers (an untar closes every file it writes). So they wait
//! [`GATHER`] for company, at most [`wire::MAX_RELEASES`] to a message, each
//! server applying them in order; what is still queued when the gateway
//! stops is sent before it goes.

use protocol_client::ProtocolClient;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use xlator::Loc;

/// How long a release waits for others to go with it.
pub const GATHER: Duration = Duration::from_millis(20);

#[derive(Default)]
pub struct Releases {
    queue: Mutex<Vec<Loc>>,
    wake: Notify,
}

impl Releases {
    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Loc>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Release what `loc` names on every server, soon.
    pub fn push(&self, loc: Loc) {
        let mut q = self.queue();
        q.push(loc);
        if q.len() == 1 || q.len() == wire::MAX_RELEASES {
            self.wake.notify_one();
        }
    }

    fn take(&self) -> Vec<Loc> {
        let mut q = self.queue();
        let n = q.len().min(wire::MAX_RELEASES);
        q.drain(..n).collect()
    }

    /// Send what is queued, batch after batch, until `stop`; then what is
    /// left.
    pub async fn run(self: Arc<Self>, servers: Vec<Arc<ProtocolClient>>, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = self.wake.notified() => {}
            }
            if self.queue().len() < wire::MAX_RELEASES {
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(GATHER) => {}
                }
            }
            loop {
                let batch = self.take();
                if batch.is_empty() {
                    break;
                }
                send(&servers, batch).await;
            }
        }
        loop {
            let batch = self.take();
            if batch.is_empty() {
                return;
            }
            send(&servers, batch).await;
        }
    }
}

async fn send(servers: &[Arc<ProtocolClient>], batch: Vec<Loc>) {
    let answers = futures::future::join_all(servers.iter().map(|s| s.releases(batch.clone()))).await;
    for (s, a) in servers.iter().zip(answers) {
        if let Err(e) = a {
            tracing::debug!(server = %s.describe(), files = batch.len(), "releases: {e:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_takes_at_most_the_bound_in_order() {
        let r = Releases::default();
        for i in 0..wire::MAX_RELEASES + 3 {
            r.push(Loc::new(format!("f{i}"), None));
        }
        let first = r.take();
        assert_eq!(first.len(), wire::MAX_RELEASES);
        assert_eq!(first[0].path, "f0");
        assert_eq!(r.take().iter().map(|l| l.path.as_str()).collect::<Vec<_>>(), ["f1024", "f1025", "f1026"]);
        assert!(r.take().is_empty());
    }
}
