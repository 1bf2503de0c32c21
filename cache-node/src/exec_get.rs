//! Executes text `get`/`gets`/`gat`/`gats`: the bank's multi-get, one line
//! of many keys, and the hottest path of a cache node.
//!
//! Each hit appends its `VALUE` header to the reply and *pins* its value
//! ([`Out::value`]): a refcount taken under the shard lock, no copy. The
//! connection then writes headers and values with one `writev` (`out.rs`).
//! A get of one key copies a value of up to 4 KiB instead
//! ([`Out::value_alone`]): for one value the pin costs more than the copy.
//! Before a batch of keys is looked up, their lookups' cache misses are
//! started together (`store/prefetch.rs`).

use cache_proto::response::{Response, Status};
use cache_proto::text::reply;

use crate::out::Out;
use crate::session::Session;

/// Largest reply one multi-get may build (a 4 MiB line of keys could
/// otherwise name terabytes of values).
const MAX_GET_REPLY: usize = 32 << 20;

impl Session {
    /// `cas`: `gets`/`gats`; `touch`: the new exptime of `gat`/`gats`
    /// (client time, as sent).
    pub(crate) fn exec_get(&mut self, keys: &[&[u8]], cas: bool, touch: Option<i32>, out: &mut Out) {
        let node = &*self.node;
        let touch = touch.map(|e| node.store.clock.realtime(e));
        let start = out.mark();
        let before = out.len();
        let watched = node.store.log.on(crate::watch::FETCHERS);
        for batch in keys.chunks(crate::store::prefetch::BATCH) {
            if keys.len() > 1 {
                node.store.prefetch(batch);
            }
            for &key in batch {
                let mut len = 0;
                let (hit, dead) = node.get_dead(&mut self.cnt, key, touch, |it| {
                    len = it.value.len();
                    reply::value_header(out.buf(), key, it.flags, len, cas.then_some(it.cas));
                    if keys.len() == 1 {
                        out.value_alone(&it.value);
                    } else {
                        out.value(&it.value);
                    }
                    out.buf().extend_from_slice(b"\r\n");
                });
                if watched {
                    self.log_fetch(key, hit.then_some(len), dead);
                }
                if hit && out.len() - before > MAX_GET_REPLY {
                    // memcached's answer when it cannot hold a reply.
                    out.truncate(start);
                    Response::ServerError(b"out of memory writing get response".as_slice()).encode(out.buf());
                    return;
                }
            }
        }
        Status::End.encode(out.buf());
    }
}
