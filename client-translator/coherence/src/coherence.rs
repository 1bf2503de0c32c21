//! The coherence translator: its state, its API for the FUSE bridge, and
//! what it does when a storage server's callback reaches it (the upcall).
//! What each file operation forgets and remembers is in `ops`.

use crate::appends::Appends;
use crate::dirs_ahead::DirsAhead;
use crate::inodes::Inodes;
use crate::kernel_cache::{KernelCache, Mode};
use crate::kernel_notify::KernelNotify;
use crate::lock_owners::LockOwners;
use crate::opens_in_flight::Opens;
use crate::releases::Releases;
use crate::stat_ahead::{Ahead, TRIGGER};
use bytes::Bytes;
use protocol_client::ProtocolClient;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use crate::inodes::ROOT_INO;
use xlator::{FsResult, Loc, Next, Upcall, WriteReply};

/// How long an append's answer waits for the kernel to drop other openers'
/// pages of the range (it takes microseconds; see [`Coherence::append`]).
const PAGES_DROPPED: Duration = Duration::from_secs(1);

/// The top translator of the client graph (see the crate page).
pub struct Coherence {
    pub(crate) next: Next,
    pub(crate) kc: Arc<KernelCache>,
    /// directories listed ahead of a walk's lookups
    pub(crate) ahead: Arc<Ahead>,
    /// directories' attributes fetched ahead after a change here whose
    /// answer did not carry them
    pub(crate) dirs_ahead: Arc<DirsAhead>,
    /// which lock owners locked what through this gateway
    locks: Arc<LockOwners>,
    /// O_APPEND writes, ordered by each file's ordering server
    appends: Arc<Appends>,
    /// opens still on their way to the servers (kernel caching on)
    opens: Arc<Opens>,
    /// releases gathered to go to the servers together
    releases: Arc<Releases>,
    /// the leaves, in stripe order: holds and lock reclaims are asked of
    /// a server itself
    servers: Vec<Arc<ProtocolClient>>,
}

impl Coherence {
    /// Above `next`, for the storage servers `servers` (stripe order).
    pub fn new(next: Next, mode: Mode, servers: Vec<Arc<ProtocolClient>>) -> Coherence {
        let kc = Arc::new(KernelCache::new(mode, servers.len(), Arc::new(Inodes::new())));
        Coherence {
            next,
            kc,
            ahead: Arc::new(Ahead::new(TRIGGER)),
            dirs_ahead: Arc::default(),
            locks: Arc::new(LockOwners::new(servers.len())),
            appends: Arc::default(),
            opens: Arc::default(),
            releases: Arc::default(),
            servers,
        }
    }

    /// List a directory ahead of a walk after `misses` lookups in it reached
    /// the servers (0: never; see `stat_ahead`).
    pub fn stat_ahead(mut self, misses: u64) -> Coherence {
        self.ahead = Arc::new(Ahead::new(misses));
        self
    }

    /// Show the answers given here, the callbacks, holds and lock reclaims in `registry`.
    pub fn register_metrics(&self, registry: &prometheus::Registry) -> prometheus::Result<()> {
        self.kc.register_metrics(registry)?;
        self.locks.register_metrics(registry)
    }

    /// What the kernel may cache and the memo: the bridge's synchronous API.
    pub fn kernel(&self) -> &Arc<KernelCache> {
        &self.kc
    }

    /// The inode table (what the kernel holds, and where it is).
    pub fn inodes(&self) -> &Arc<Inodes> {
        self.kc.inodes()
    }

    /// The lock owners of this gateway (their calls go to [`Coherence::lower`]).
    pub fn locks(&self) -> &Arc<LockOwners> {
        &self.locks
    }

    /// The translator below: where lock calls go (no memo answers them).
    pub fn lower(&self) -> &Next {
        &self.next
    }

    /// How the kernel is told to forget, once the kernel session exists.
    pub fn set_notifier(&self, n: Box<dyn KernelNotify>) {
        self.kc.set_notifier(n);
    }

    /// Give back what the kernel forgot and ask the servers to hold what it
    /// is about to cache, round after round, until `stop` (see `holds`).
    pub fn run_holds(&self, stop: impl Future<Output = ()>) -> impl Future<Output = ()> {
        self.kc.holds().clone().run(self.servers.clone(), self.kc.drop_from_kernel(), stop)
    }

    /// Send the releases the kernel's closes leave (see `releases`), until
    /// `stop`, and then what is left.
    pub fn run_releases(&self, stop: impl Future<Output = ()>) -> impl Future<Output = ()> {
        self.releases.clone().run(self.servers.clone(), stop)
    }

    /// The kernel closed what `loc` names: every server hears it soon, in
    /// a message with others (see `releases`).
    pub fn release_later(&self, loc: Loc) {
        self.releases.push(loc);
    }

    /// Open handle `fh` (of what `loc` names, with open(2) `flags`) on the
    /// servers in the background, unless its release comes first (see
    /// `opens_in_flight`); `rt` runs the sender.
    pub fn open_later(&self, rt: &tokio::runtime::Handle, fh: u64, loc: Loc, flags: i32) {
        let next = self.next.clone();
        self.opens.start(rt, fh, async move { next.open(&loc, flags).await });
    }

    /// Whether handle `fh`'s open reached the servers, so its release is
    /// owed (an open not sent yet is cancelled).
    pub async fn landed(&self, fh: u64) -> bool {
        self.opens.landed(fh).await
    }

    /// An `O_APPEND` write of `data` (see `appends`): where the kernel
    /// thought the end was is `offset`, and `direct` says the open file
    /// bypasses the kernel's pages. Returns the write's answer.
    pub async fn append(&self, loc: &Loc, offset: u64, data: Bytes, direct: bool) -> FsResult<WriteReply> {
        let ino = ino(loc);
        // what was remembered goes, as for any write
        self.kc.changing_attrs(ino);
        // The kernel's idea of the end may be stale (another gateway
        // appended): the file's ordering server gives the turn, the
        // volume's size the place.
        let r = self.appends.append(&self.next, loc, ino, data).await;
        self.kc.changing_inode(ino);
        let (at, w) = r?;
        if direct {
            // Another opener's pages of that range, and every opener's
            // size, go before the application hears of it. (Bounded: a
            // kernel that kept this write in its pages after all would
            // hold them locked until answered.)
            let drop = self.kc.written_elsewhere(ino, at, u64::from(w.written));
            if tokio::time::timeout(PAGES_DROPPED, drop).await.is_err() {
                tracing::warn!(ino, "the kernel did not drop an append's pages in time");
            }
        } else if at != offset {
            // O_APPEND set after the open (fcntl): the kernel holds
            // the pages of the range it believed locked until this is
            // answered, then keeps them: they go once it lets go.
            let (kc, from) = (self.kc.clone(), at.min(offset));
            tokio::spawn(async move { kc.written_elsewhere(ino, from, 0).await });
        }
        Ok(w)
    }

    /// Server `u.server`'s callbacks reached the top of the graph: what
    /// they name goes from the memo and the kernel before this returns
    /// (the poll that acknowledges them follows).
    pub(crate) async fn heard(&self, u: &Upcall) {
        let i = u.server;
        if u.session_lost {
            // It holds nothing for us (before our first poll, a create's
            // hold was not recorded either).
            self.kc.holds().forgotten(i);
        }
        if u.session_lost || u.lease_lapsed {
            // Its lock table may be new too (a restart), or have dropped
            // ours: ask back what our owners hold there, while it waits
            // for that (its grace), and without holding up this lease.
            if let Some(server) = self.servers.get(i) {
                let (locks, server) = (self.locks.clone(), server.clone());
                tokio::spawn(async move { locks.server_restarted(i, &server).await });
            }
        }
        self.kc.apply(&u.items).await;
        self.kc.holds().applied(i, u.seq);
        if let Some(until) = u.lease_until {
            self.kc.renew(i, until);
        }
    }
}

/// The inode number of what `loc` names (the kernel's, and the memo's key).
pub(crate) fn ino(loc: &Loc) -> u64 {
    loc.fid.map_or(ROOT_INO, |f| f.ino())
}
