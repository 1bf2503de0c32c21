//! One deadline per operation, end to end.
//!
//! A file operation may make several storage calls in a row (a lookup then
//! a create, a write to each server it spans, a retry after a reconnect).
//! Bounding each call by the op timeout bounds the operation only by a
//! multiple of it: a frozen server once made one `open(O_CREAT)` wait twice
//! the timeout. The gateway's FUSE layer runs every request inside
//! [`operation`], which records when it started; every call a protocol-client
//! makes within it waits at most until that start plus its op timeout
//! ([`remaining`]). Calls made outside any operation (background polls,
//! holds, the config lease) get the whole op timeout each.

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

tokio::task_local! {
    static STARTED: Instant;
}

/// Run `work` as one operation started now: the storage calls it makes
/// share one deadline. A request the server holds on purpose and that is
/// asked again and again (a blocking lock) starts an operation per ask.
pub fn operation<F: Future>(work: F) -> impl Future<Output = F::Output> {
    STARTED.scope(Instant::now(), work)
}

/// What is left of `timeout` for a call made now: all of it outside an
/// operation, what the operation has not used yet inside one (zero: fail
/// now).
pub fn remaining(timeout: Duration) -> Duration {
    match STARTED.try_with(|s| *s) {
        Ok(started) => timeout.saturating_sub(started.elapsed()),
        Err(_) => timeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn calls_in_one_operation_share_its_deadline() {
        let t = Duration::from_secs(2);
        assert_eq!(remaining(t), t, "outside an operation: the whole timeout");
        operation(async {
            assert_eq!(remaining(t), t);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert_eq!(remaining(t), Duration::from_millis(500), "the second call gets what the first left");
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(remaining(t), Duration::ZERO);
            operation(async { assert_eq!(remaining(t), t, "a new ask starts a new operation") }).await;
        })
        .await;
    }
}
