//! The one place a FUSE request is answered from a future: run the work on
//! the runtime, then either the success reply or the errno.

use super::convert::errno;
use fuser::*;
use std::future::Future;
use xlator::FsResult;

/// A fuser reply that can be answered with an errno.
pub trait Answer: Send + 'static {
    fn fail(self, e: Errno);
}

macro_rules! answers {
    ($($t:ty),* $(,)?) => {$(
        impl Answer for $t {
            fn fail(self, e: Errno) {
                self.error(e)
            }
        }
    )*};
}

answers!(ReplyEntry, ReplyAttr, ReplyData, ReplyEmpty, ReplyOpen, ReplyWrite, ReplyStatfs, ReplyXattr, ReplyCreate, ReplyDirectory, ReplyDirectoryPlus, ReplyLock);

/// Answer `reply` with `result`: `ok(reply, value)` or the errno.
pub fn finish<R: Answer, T>(reply: R, result: FsResult<T>, ok: impl FnOnce(R, T)) {
    match result {
        Ok(v) => ok(reply, v),
        Err(e) => reply.fail(errno(e)),
    }
}

/// Run `work` and answer `reply` when it is done: here until it first
/// waits, then on `rt` (see `first_poll`), so a slow request never holds up
/// the fuser thread that read it.
pub fn answer<R: Answer, T: Send + 'static>(
    rt: &tokio::runtime::Handle,
    reply: R,
    work: impl Future<Output = FsResult<T>> + Send + 'static,
    ok: impl FnOnce(R, T) + Send + 'static,
) {
    super::first_poll::run(rt, async move { finish(reply, work.await, ok) });
}
