//! The session's side of `watch` (`watch.rs`): the command itself, and the
//! log lines of the requests it runs (fetchers, mutations), named by this
//! connection's fd as memcached names them (`cfd=`).

use cache_proto::text::StoreOp;

use crate::node::StoreResult;
use crate::session::{After, Session};
use crate::watch;

impl Session {
    /// `watch`: memcached's checks and replies; on success the session
    /// stops (`After::Watch`) and [`take_watcher`](Self::take_watcher) has it.
    pub(crate) fn watch(&mut self, kinds: &[&[u8]], noreply: bool, out: &mut Vec<u8>) -> After {
        let reply = if self.stacked {
            "ERROR cannot pipeline other commands before watch"
        } else if self.conn.is_none() {
            // a transport with no socket to stream to (RDMA)
            "WATCHER_FAILED failed to add log watcher"
        } else {
            match watch::kinds(kinds).map(|f| self.node.store.log.add(f)) {
                None => "ERROR",
                Some(Err(too_many)) => too_many,
                Some(Ok(w)) => {
                    if let Some(c) = &self.conn {
                        c.set_state(crate::conns::State::Watch);
                    }
                    self.watcher = Some(w);
                    out.extend_from_slice(b"OK\r\n");
                    return After::Watch;
                }
            }
        };
        if !noreply {
            out.extend_from_slice(reply.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        After::Continue
    }

    /// The fd `watch` lines name this connection by (`cfd=`).
    pub(crate) fn cfd(&self) -> i32 {
        self.conn.as_ref().map_or(-1, |c| c.fd)
    }

    /// Before a store, when someone watches fetchers: the length of the
    /// item the store will find (`Some(None)`: none). memcached's store looks
    /// the old item up and logs that lookup as an `item_get` line.
    pub(crate) fn store_lookup(&self, key: &[u8]) -> Option<Option<usize>> {
        let log = &self.node.store.log;
        log.on(watch::FETCHERS).then(|| self.node.store.with(key, |slot| slot.peek().map(|it| it.value.len())))
    }

    /// `watch mutations` (and the lookup `store_lookup` saw, for `watch
    /// fetchers`): a store's lines, as memcached logs them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn log_store(&self, looked: Option<Option<usize>>, op: StoreOp, cas_in: u64, key: &[u8], exptime: u32, size: usize, r: &StoreResult) {
        let log = &self.node.store.log;
        if let Some(found) = looked {
            watch::log_get(log, key, found, self.cfd());
        }
        if !log.on(watch::MUTATIONS) {
            return;
        }
        let status = match r {
            StoreResult::Stored(_) => "stored",
            StoreResult::NotStored => "not_stored",
            StoreResult::Exists => "exists",
            StoreResult::NotFound => "not_found",
            StoreResult::NoMemory => "no_memory",
        };
        // memcached's store modes: a CAS on anything but add is "cas"
        let cmd = match op {
            StoreOp::Add => "add",
            _ if cas_in != 0 => "cas",
            StoreOp::Set => "set",
            StoreOp::Replace => "replace",
            StoreOp::Append => "append",
            StoreOp::Prepend => "prepend",
            StoreOp::Cas => "cas",
        };
        let ttl = if exptime != 0 { exptime.wrapping_sub(self.node.store.clock.now()) } else { 0 };
        let size = if matches!(r, StoreResult::NoMemory) { 0 } else { size };
        watch::log_store(log, key, status, cmd, ttl, size, self.cfd());
    }

    /// `watch fetchers`: a lookup's line (`found` = the value's length).
    pub(crate) fn log_get(&self, key: &[u8], found: Option<usize>) {
        self.log_fetch(key, found, None);
    }

    /// [`log_get`](Self::log_get) saying why a stored item was dead.
    pub(crate) fn log_fetch(&self, key: &[u8], found: Option<usize>, dead: Option<crate::store::Dead>) {
        if self.node.store.log.on(watch::FETCHERS) {
            watch::log_fetch(&self.node.store.log, key, found, dead, self.cfd());
        }
    }
}
