//! POSIX, OFD and flock locks through FUSE: the kernel's lock requests go
//! to the file's ordering server (stripe routes them), never decided here.
//!
//! ```text
//!  fcntl/lockf/flock ─> kernel ─ GETLK/SETLK(W) ─> getlk/setlk ─> stripe ─> ordering server's lock table
//!  close(fd)         ─> kernel ─ FLUSH(owner)   ─> unlock (0..EOF) of that owner, if it ever locked here
//!  last close        ─> kernel ─ RELEASE(fh[, flock owner]) ─> unlock of every owner that locked through fh
//! ```
//!
//! A blocking request (F_SETLKW, flock without LOCK_NB) is held by the server
//! a few seconds at a time; on its "not yet" (EAGAIN) this gateway asks again
//! until granted, unless the owner closed the file meanwhile (the process was
//! interrupted or died): then it gives up, and drops what a late grant gave.
//!
//! The kernel closes POSIX locks with FLUSH (its own lock list is empty:
//! the locks live on the server), flock locks with RELEASE's flag. OFD locks
//! (owner = the open file) get neither, so this module remembers which owners
//! locked through which open file (`fh`) and unlocks them at RELEASE.
//! fuser 0.18 does not pass FUSE_LK_FLOCK, so flock locks travel as whole-file
//! POSIX locks of the open file (as Linux's NFS client emulates flock): a
//! flock and an fcntl lock on one file conflict here, unlike on a local disk.
//!
//! What each owner was granted is remembered ([`Granted`]) and asked back
//! when the file's ordering server restarts; an owner whose locks could not
//! be is told so by EIO on its next lock call on the file.

use crate::lock_reclaim::Granted;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlator::{FsError, FsResult, Loc, Lock, LockKind, LockType, Next, LOCK_TO_EOF};

/// Owners remembered per file (past it, new locks fail with ENOLCK).
pub const MAX_USES_PER_FILE: usize = 1024;
/// Files with lock owners remembered.
pub const MAX_FILES: usize = 65536;
/// A server that answered "not yet" this fast was too busy to hold the
/// request: wait this long before asking again.
pub const BUSY_BACKOFF: Duration = Duration::from_millis(100);

/// fcntl's lock type as the operations carry it.
pub fn lock_type(typ: i32) -> FsResult<LockType> {
    match typ {
        libc::F_RDLCK => Ok(LockType::Read),
        libc::F_WRLCK => Ok(LockType::Write),
        libc::F_UNLCK => Ok(LockType::Unlock),
        _ => Err(FsError::EINVAL),
    }
}

/// And back, for F_GETLK's answer.
pub fn fcntl_type(typ: LockType) -> i32 {
    match typ {
        LockType::Read => libc::F_RDLCK,
        LockType::Write => libc::F_WRLCK,
        LockType::Unlock => libc::F_UNLCK,
    }
}

/// A lock request from the kernel (its whole-file end is OFFSET_MAX).
pub fn request(owner: u64, start: u64, end: u64, typ: LockType, pid: u32) -> Lock {
    Lock { kind: LockKind::Posix, typ, start, end: end.min(LOCK_TO_EOF), owner, pid }
}

fn unlock_all(owner: u64) -> Lock {
    request(owner, 0, LOCK_TO_EOF, LockType::Unlock, 0)
}

#[derive(Default)]
struct State {
    /// per inode: (owner, fh) pairs that took a lock
    uses: HashMap<u64, Vec<(u64, u64)>>,
    /// per (inode, owner): blocking requests under way, and the flag a
    /// flush of that owner raises to stop them
    pending: HashMap<(u64, u64), (usize, Arc<AtomicBool>)>,
}

/// Which owners locked what through this gateway.
pub struct LockOwners {
    state: Mutex<State>,
    /// what they were granted, for a restarted server
    granted: Granted,
}

impl Default for LockOwners {
    fn default() -> LockOwners {
        LockOwners::new(1)
    }
}

impl LockOwners {
    /// For a volume of `servers` storage servers.
    pub fn new(servers: usize) -> LockOwners {
        LockOwners { state: Mutex::default(), granted: Granted::new(servers) }
    }

    /// Show the reclaims and lost locks in `registry`.
    pub fn register_metrics(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        self.granted.register(registry)
    }

    /// Storage server `i` (reached by `client`) answered a poll as one that
    /// does not know this gateway (it restarted), or after this gateway's
    /// lease there ran out (it may have dropped our locks): ask back the
    /// locks held on the files it orders.
    pub async fn server_restarted(&self, i: usize, client: &protocol_client::ProtocolClient) {
        self.granted.reclaim(i, client).await;
    }

    /// F_GETLK. A restarted server answers "not yet" during its grace: ask again.
    pub async fn getlk(&self, xl: &Next, loc: &Loc, ino: u64, lock: Lock) -> FsResult<Lock> {
        if self.granted.take_lost(ino, lock.owner) {
            return Err(FsError::EIO);
        }
        loop {
            let sent = Instant::now();
            // held by the server through a grace after its restart: each ask
            // gets its own deadline, as a blocking setlk's
            match protocol_client::operation(xl.getlk(loc, &lock)).await {
                Err(e) if e.errno() == libc::EAGAIN => {
                    if sent.elapsed() < BUSY_BACKOFF {
                        tokio::time::sleep(BUSY_BACKOFF).await;
                    }
                }
                r => return r,
            }
        }
    }

    /// Take, change or drop a lock (through `fh`), asking again while a
    /// blocking request is told "not yet".
    pub async fn setlk(&self, xl: &Next, loc: &Loc, ino: u64, fh: u64, lock: Lock, sleep: bool) -> FsResult<()> {
        if self.granted.take_lost(ino, lock.owner) {
            // Its locks on the file went with a server's restart.
            return Err(FsError::EIO);
        }
        if lock.typ != LockType::Unlock {
            self.note(ino, lock.owner, fh)?;
        }
        if !sleep {
            return self.ask(xl, loc, ino, &lock, false).await;
        }
        let stop = self.wait_start(ino, lock.owner);
        let result = self.keep_asking(xl, loc, ino, &lock, &stop).await;
        self.wait_end(ino, lock.owner, &stop);
        result
    }

    /// One request, not crossing a reclaim of the file; what it grants (or
    /// drops) is remembered.
    async fn ask(&self, xl: &Next, loc: &Loc, ino: u64, lock: &Lock, wait: bool) -> FsResult<()> {
        let _g = self.granted.guard(ino).read().await;
        let r = xl.setlk(loc, lock, wait).await;
        if r.is_ok() || lock.typ == LockType::Unlock {
            self.granted.note(ino, loc.fid, lock);
        }
        r
    }

    async fn keep_asking(&self, xl: &Next, loc: &Loc, ino: u64, lock: &Lock, stop: &AtomicBool) -> FsResult<()> {
        loop {
            let sent = Instant::now();
            // Each ask is held by the server for a while: it gets its own
            // deadline (the request as a whole waits until granted).
            let r = protocol_client::operation(self.ask(xl, loc, ino, lock, true)).await;
            if stop.load(SeqCst) {
                // The owner closed the file while waiting: nobody wants it.
                if r.is_ok() {
                    let _ = self.ask(xl, loc, ino, &Lock { typ: LockType::Unlock, ..*lock }, false).await;
                }
                return Err(FsError(libc::EINTR));
            }
            match r {
                Err(e) if e.errno() == libc::EAGAIN => {
                    if sent.elapsed() < BUSY_BACKOFF {
                        tokio::time::sleep(BUSY_BACKOFF).await;
                    }
                }
                r => return r,
            }
        }
    }

    /// Whether `owner` locked (or waits for a lock on) `ino` through this
    /// gateway: a close of anyone else's needs no round trip.
    pub fn involved(&self, ino: u64, owner: u64) -> bool {
        let st = self.state.lock().unwrap();
        st.pending.contains_key(&(ino, owner)) || st.uses.get(&ino).is_some_and(|v| v.iter().any(|(o, _)| *o == owner))
    }

    /// A close by `owner` (FLUSH): drop its POSIX locks on the file, if it
    /// ever took one here, and stop its blocking requests.
    pub async fn flush(&self, xl: &Next, loc: &Loc, ino: u64, owner: u64) -> FsResult<()> {
        let had = {
            let mut st = self.state.lock().unwrap();
            let pending = st.pending.remove(&(ino, owner)).inspect(|(_, stop)| stop.store(true, SeqCst)).is_some();
            let used = match st.uses.get_mut(&ino) {
                Some(v) => {
                    let before = v.len();
                    v.retain(|(o, _)| *o != owner);
                    let used = v.len() != before;
                    if v.is_empty() {
                        st.uses.remove(&ino);
                    }
                    used
                }
                None => false,
            };
            pending || used
        };
        if !had {
            self.granted.forget(ino, owner);
            return Ok(());
        }
        self.drop_owner(xl, loc, ino, owner).await
    }

    /// Unlock all of `owner`'s locks on the file: it closed it, so nothing
    /// of it is asked back or reported lost any more.
    async fn drop_owner(&self, xl: &Next, loc: &Loc, ino: u64, owner: u64) -> FsResult<()> {
        let _g = self.granted.guard(ino).read().await;
        self.granted.forget(ino, owner);
        xl.setlk(loc, &unlock_all(owner), false).await
    }

    /// The last close of open file `fh` (RELEASE): drop the locks of every
    /// owner that locked through it (OFD locks), and of `flock_owner`.
    pub async fn release(&self, xl: &Next, loc: &Loc, ino: u64, fh: u64, flock_owner: Option<u64>) {
        let mut owners: Vec<u64> = {
            let mut st = self.state.lock().unwrap();
            match st.uses.get_mut(&ino) {
                Some(v) => {
                    let owners = v.iter().filter(|(_, f)| *f == fh).map(|(o, _)| *o).collect();
                    v.retain(|(_, f)| *f != fh);
                    if v.is_empty() {
                        st.uses.remove(&ino);
                    }
                    owners
                }
                None => Vec::new(),
            }
        };
        owners.extend(flock_owner);
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            if let Err(e) = self.drop_owner(xl, loc, ino, owner).await {
                tracing::warn!(path = %loc.path, ?e, "dropping a closed file's locks failed");
            }
        }
    }

    fn note(&self, ino: u64, owner: u64, fh: u64) -> FsResult<()> {
        let mut st = self.state.lock().unwrap();
        if !st.uses.contains_key(&ino) && st.uses.len() >= MAX_FILES {
            return Err(FsError(libc::ENOLCK));
        }
        let v = st.uses.entry(ino).or_default();
        if !v.contains(&(owner, fh)) {
            if v.len() >= MAX_USES_PER_FILE {
                return Err(FsError(libc::ENOLCK));
            }
            v.push((owner, fh));
        }
        Ok(())
    }

    fn wait_start(&self, ino: u64, owner: u64) -> Arc<AtomicBool> {
        let mut st = self.state.lock().unwrap();
        let e = st.pending.entry((ino, owner)).or_insert_with(|| (0, Arc::default()));
        e.0 += 1;
        e.1.clone()
    }

    fn wait_end(&self, ino: u64, owner: u64, stop: &Arc<AtomicBool>) {
        let mut st = self.state.lock().unwrap();
        // (A flush may have replaced the entry: then it is not ours.)
        if let Some(e) = st.pending.get_mut(&(ino, owner)).filter(|e| Arc::ptr_eq(&e.1, stop)) {
            e.0 -= 1;
            if e.0 == 0 {
                st.pending.remove(&(ino, owner));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use xlator::{FileId, Translator};

    /// Records every setlk; answers EAGAIN to a blocking one `busy` times.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<Lock>>,
        busy: Mutex<usize>,
    }

    #[async_trait]
    impl Translator for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        async fn setlk(&self, _loc: &Loc, lock: &Lock, wait: bool) -> FsResult<()> {
            self.calls.lock().unwrap().push(*lock);
            let mut busy = self.busy.lock().unwrap();
            if wait && *busy > 0 {
                *busy -= 1;
                return Err(FsError(libc::EAGAIN));
            }
            Ok(())
        }
    }

    fn setup() -> (Arc<Recorder>, Next, Loc) {
        let r = Arc::new(Recorder::default());
        (r.clone(), r, Loc::new("f", Some(FileId(9))))
    }

    fn write(owner: u64) -> Lock {
        request(owner, 0, 9, LockType::Write, 1)
    }

    #[tokio::test]
    async fn a_close_unlocks_only_owners_that_locked() {
        let (r, xl, loc) = setup();
        let owners = LockOwners::default();
        owners.setlk(&xl, &loc, 1, 100, write(7), false).await.unwrap();
        assert!(owners.involved(1, 7));
        assert!(!owners.involved(1, 8) && !owners.involved(2, 7));
        owners.flush(&xl, &loc, 1, 8).await.unwrap();
        assert_eq!(r.calls.lock().unwrap().len(), 1, "another owner's close sends nothing");
        owners.flush(&xl, &loc, 1, 7).await.unwrap();
        assert_eq!(r.calls.lock().unwrap()[1], unlock_all(7));
        assert!(!owners.involved(1, 7));
    }

    #[tokio::test]
    async fn the_last_close_unlocks_the_open_files_owners_and_its_flock() {
        let (r, xl, loc) = setup();
        let owners = LockOwners::default();
        owners.setlk(&xl, &loc, 1, 100, write(7), false).await.unwrap();
        owners.setlk(&xl, &loc, 1, 101, write(8), false).await.unwrap();
        r.calls.lock().unwrap().clear();
        owners.release(&xl, &loc, 1, 100, Some(5)).await;
        assert_eq!(*r.calls.lock().unwrap(), vec![unlock_all(5), unlock_all(7)]);
        assert!(owners.involved(1, 8), "another open file's owner stays");
    }

    #[tokio::test]
    async fn a_blocking_request_asks_again_until_granted() {
        let (r, xl, loc) = setup();
        *r.busy.lock().unwrap() = 3;
        LockOwners::default().setlk(&xl, &loc, 1, 100, write(7), true).await.unwrap();
        assert_eq!(r.calls.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn a_close_stops_a_blocking_request_and_drops_a_late_grant() {
        let (r, xl, loc) = setup();
        *r.busy.lock().unwrap() = usize::MAX;
        let owners = Arc::new(LockOwners::default());
        let waiting = {
            let (owners, xl, loc) = (owners.clone(), xl.clone(), loc.clone());
            tokio::spawn(async move { owners.setlk(&xl, &loc, 1, 100, write(7), true).await })
        };
        // Ready once it has asked (and been told "not yet") at least once.
        while r.calls.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(owners.involved(1, 7));
        owners.flush(&xl, &loc, 1, 7).await.unwrap();
        *r.busy.lock().unwrap() = 0; // the next ask is granted, too late
        assert_eq!(waiting.await.unwrap(), Err(FsError(libc::EINTR)));
        let calls = r.calls.lock().unwrap();
        assert_eq!(calls.last().unwrap().typ, LockType::Unlock);
        assert!(!owners.involved(1, 7));
    }
}
