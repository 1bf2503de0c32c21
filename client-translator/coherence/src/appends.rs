//! `O_APPEND` writes across gateways: the file's ordering server decides
//! whose append goes next, the volume's merged size decides where it lands.
//!
//! ```text
//!  write(fd opened O_APPEND) ─> kernel (FOPEN_DIRECT_IO: no page cache; its offset is ignored)
//!    ─> WRITE ─> Appends::append
//!         per-file mutex                 one append lock request per file per gateway
//!         setlk(Append, write, wait) ─> stripe ─> the file's ordering server's lock table
//!         getattr ─> merged size S       every earlier append was answered before its unlock
//!         write(S, data)                 answered once every server it touches applied it
//!         setlk(Append, unlock)          the next gateway's turn
//! ```
//!
//! The lock is of the gateways' own family ([`LockKind::Append`]): no
//! application lock conflicts with it, whatever its range. It belongs to
//! this gateway's session, so the server drops it with the session's other
//! locks when the gateway's lease ends: a gateway killed or cut off in the
//! middle of an append holds the others up for one lease at most.
//!
//! Why the size read under the lock is the end: the previous holder's write
//! was answered before it unlocked, and a write is answered only after every
//! server applied its piece and removed the bank's stat (SMCache), so the
//! getattr sees it. What is not ordered against appends: plain writes and
//! truncates through other gateways (an append racing a truncate may land
//! past the new end, as on NFS).

use crate::lock_owners::BUSY_BACKOFF;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use xlator::{FsResult, Loc, Lock, LockKind, LockType, Next, WriteReply, LOCK_TO_EOF};

/// How often a failed unlock is sent again (about a minute in all) before
/// it is left to the lease: other gateways' appends to the file wait until
/// this gateway's next append to it, or until its lease ends.
const UNLOCK_TRIES: u32 = 60;

/// The append lock of this gateway on a file (one per session: the local
/// mutex makes the holder unique, so owner and pid carry nothing).
fn append_lock(typ: LockType) -> Lock {
    Lock { kind: LockKind::Append, typ, start: 0, end: LOCK_TO_EOF, owner: 0, pid: 0 }
}

/// The appends under way through this gateway, per inode.
#[derive(Default)]
pub struct Appends {
    /// only while an append to the inode is under way (bounded by the
    /// requests in flight)
    files: Mutex<HashMap<u64, Arc<AsyncMutex<()>>>>,
}

impl Appends {
    /// Append `data` to the file at its end on the volume; returns the
    /// offset it landed at and the write's answer.
    pub async fn append(self: &Arc<Self>, xl: &Next, loc: &Loc, ino: u64, data: Bytes) -> FsResult<(u64, WriteReply)> {
        let turn = self.file(ino).lock_owned().await;
        if let Err(e) = take(xl, loc).await {
            self.done(ino, turn);
            return Err(e);
        }
        let r = async {
            let at = xl.getattr(loc).await?.size;
            Ok((at, xl.write(loc, at, data).await?))
        }
        .await;
        if let Err(e) = xl.setlk(loc, &append_lock(LockType::Unlock), false).await {
            // Keep this file's turn until it is released: a late unlock
            // must not release this gateway's next append to it.
            tracing::warn!(path = %loc.path, ?e, "releasing the append lock failed; trying again");
            let (me, xl, loc) = (self.clone(), xl.clone(), loc.clone());
            tokio::spawn(async move {
                unlock_again(&xl, &loc).await;
                me.done(ino, turn);
            });
            return r;
        }
        self.done(ino, turn);
        r
    }

    fn file(&self, ino: u64) -> Arc<AsyncMutex<()>> {
        self.files.lock().unwrap().entry(ino).or_default().clone()
    }

    /// The append to `ino` is over: its mutex goes when nobody waits on it.
    fn done(&self, ino: u64, turn: OwnedMutexGuard<()>) {
        drop(turn);
        let mut files = self.files.lock().unwrap();
        if files.get(&ino).is_some_and(|m| Arc::strong_count(m) == 1) {
            files.remove(&ino);
        }
    }
}

/// Take the file's append lock, asking again while the server says "not
/// yet" (it holds a blocking request a few seconds at a time).
async fn take(xl: &Next, loc: &Loc) -> FsResult<()> {
    loop {
        let sent = Instant::now();
        match xl.setlk(loc, &append_lock(LockType::Write), true).await {
            Err(e) if e.errno() == libc::EAGAIN => {
                if sent.elapsed() < BUSY_BACKOFF {
                    // Answered at once: the server was too busy to hold it.
                    tokio::time::sleep(BUSY_BACKOFF).await;
                }
            }
            r => return r,
        }
    }
}

async fn unlock_again(xl: &Next, loc: &Loc) {
    let mut wait = Duration::from_millis(100);
    for _ in 0..UNLOCK_TRIES {
        tokio::time::sleep(wait).await;
        if xl.setlk(loc, &append_lock(LockType::Unlock), false).await.is_ok() {
            return;
        }
        wait = (wait * 2).min(Duration::from_secs(1));
    }
    tracing::warn!(path = %loc.path, "the append lock stays until this gateway's next append to the file or its lease ends");
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use xlator::{Attr, FileId, FileKind, FsError, Timestamp, Translator};

    /// A file of `size` bytes whose append lock is refused `busy` times and
    /// whose first `failing_unlocks` unlocks fail; records the calls.
    #[derive(Default)]
    struct File {
        size: Mutex<u64>,
        calls: Mutex<Vec<String>>,
        busy: Mutex<usize>,
        failing_unlocks: Mutex<usize>,
    }

    #[async_trait]
    impl Translator for File {
        fn name(&self) -> &str {
            "file"
        }
        async fn setlk(&self, _loc: &Loc, lock: &Lock, wait: bool) -> FsResult<()> {
            assert_eq!(lock.kind, LockKind::Append);
            self.calls.lock().unwrap().push(format!("{:?}", lock.typ));
            if lock.typ == LockType::Unlock {
                let mut f = self.failing_unlocks.lock().unwrap();
                if *f > 0 {
                    *f -= 1;
                    return Err(FsError::EIO);
                }
                return Ok(());
            }
            assert!(wait);
            let mut busy = self.busy.lock().unwrap();
            if *busy > 0 {
                *busy -= 1;
                return Err(FsError(libc::EAGAIN));
            }
            Ok(())
        }
        async fn getattr(&self, _loc: &Loc) -> FsResult<Attr> {
            self.calls.lock().unwrap().push("getattr".into());
            let t = Timestamp::default();
            let size = *self.size.lock().unwrap();
            let (fid, kind) = (FileId(9), FileKind::File);
            Ok(Attr { fid, kind, size, blocks: 0, perm: 0o644, nlink: 1, uid: 0, gid: 0, rdev: 0, atime: t, mtime: t, ctime: t })
        }
        async fn write(&self, _loc: &Loc, offset: u64, data: Bytes) -> FsResult<WriteReply> {
            self.calls.lock().unwrap().push(format!("write@{offset}"));
            *self.size.lock().unwrap() = offset + data.len() as u64;
            Ok(WriteReply { written: data.len() as u32, attr: None, size_before: None, blocks_before: None })
        }
    }

    fn setup(size: u64) -> (Arc<File>, Next, Loc, Arc<Appends>) {
        let f = Arc::new(File { size: Mutex::new(size), ..File::default() });
        (f.clone(), f, Loc::new("f", Some(FileId(9))), Arc::default())
    }

    #[tokio::test]
    async fn an_append_writes_at_the_size_read_under_the_lock() {
        let (f, xl, loc, appends) = setup(10);
        *f.busy.lock().unwrap() = 2;
        let (at, w) = appends.append(&xl, &loc, 1, Bytes::from_static(b"abc")).await.unwrap();
        assert_eq!((at, w.written), (10, 3));
        assert_eq!(*f.calls.lock().unwrap(), ["Write", "Write", "Write", "getattr", "write@10", "Unlock"]);
        assert!(appends.files.lock().unwrap().is_empty(), "nothing kept once done");
    }

    #[tokio::test]
    async fn a_failed_unlock_is_sent_again_before_the_next_append_locks() {
        let (f, xl, loc, appends) = setup(0);
        *f.failing_unlocks.lock().unwrap() = 2;
        appends.append(&xl, &loc, 1, Bytes::from_static(b"a")).await.unwrap();
        appends.append(&xl, &loc, 1, Bytes::from_static(b"b")).await.unwrap();
        let calls = f.calls.lock().unwrap().clone();
        assert_eq!(calls, ["Write", "getattr", "write@0", "Unlock", "Unlock", "Unlock", "Write", "getattr", "write@1", "Unlock"]);
    }
}
