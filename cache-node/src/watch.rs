//! memcached's `watch`: a connection that asks for it stops taking
//! commands and receives the node's log lines of the kinds it named, in
//! memcached 1.6.18's formats (`ts=<sec>.<usec> gid=<n> type=...`):
//!
//! ```text
//!  request paths (exec_*.rs) ──item_get / item_store──┐
//!  store.rs (evict_one) ─────────────eviction─────────┼──> Log::emit ──> each matching
//!  server.rs (accept / close) ─conn_new / conn_close──┘     watcher's buffer ──> server.rs
//!                                                            (bounded; overflow: skipped=N)  writes it out
//! ```
//!
//! Kinds built: `fetchers`, `mutations`, `evictions`, `connevents`.
//! `rawcmds`, `sysevents`, `proxyreqs`, `proxyevents` and `proxyuser` are
//! accepted as memcached accepts them and, as in memcached 1.6.18 without a
//! proxy, crawler or slab mover running, never produce a line (memcached
//! logs no raw commands in 1.6.18). Another word is memcached's `ERROR`.
//!
//! Cost when nobody watches: one relaxed atomic load per request
//! ([`Log::on`]). A watcher's buffer holds `watcher_logbuf_size` bytes
//! (256 KiB, memcached's default); lines that do not fit are counted and
//! reported as memcached reports them (`skipped=N`) once there is room.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

pub const FETCHERS: u16 = 1;
pub const MUTATIONS: u16 = 1 << 1;
pub const EVICTIONS: u16 = 1 << 2;
pub const CONNEVENTS: u16 = 1 << 3;
/// accepted kinds that never log here (see the module page)
const SILENT: u16 = 1 << 15;

/// memcached's WATCHER_LIMIT.
pub const LIMIT: usize = 20;
/// memcached's default `watcher_logbuf_size`.
pub const BUF: usize = 256 * 1024;

/// The kinds named on a `watch` line, or `None` for memcached's `ERROR`.
pub fn kinds(words: &[&[u8]]) -> Option<u16> {
    if words.is_empty() {
        return Some(FETCHERS);
    }
    let mut f = 0;
    for w in words {
        f |= match *w {
            b"fetchers" => FETCHERS,
            b"mutations" => MUTATIONS,
            b"evictions" => EVICTIONS,
            b"connevents" => CONNEVENTS,
            b"rawcmds" | b"sysevents" | b"proxyreqs" | b"proxyevents" | b"proxyuser" => SILENT,
            _ => return None,
        };
    }
    Some(f)
}

/// One watching connection's pending output.
pub struct Watcher {
    flags: u16,
    buf: Mutex<Pending>,
    /// signalled when lines arrive
    pub ready: tokio::sync::Notify,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    skipped: u64,
}

impl Watcher {
    /// What arrived since the last call (empty if nothing).
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.buf.lock().unwrap_or_else(|e| e.into_inner()).bytes)
    }

    fn push(&self, line: &[u8]) {
        let mut p = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        // memcached asks for the line plus 128 bytes (room for a skipped= line)
        if p.bytes.len() + line.len() + 128 > BUF {
            p.skipped += 1;
            return;
        }
        if p.skipped > 0 {
            let n = p.skipped;
            p.bytes.extend_from_slice(format!("skipped={n}\n").as_bytes());
            p.skipped = 0;
        }
        p.bytes.extend_from_slice(line);
        drop(p);
        self.ready.notify_one();
    }
}

/// The node's log hub: the watchers and the union of what they want.
#[derive(Default)]
pub struct Log {
    wanted: AtomicU16,
    gid: AtomicU64,
    watchers: Mutex<Vec<Arc<Watcher>>>,
}

/// `watch`'s refusal when [`LIMIT`] watchers exist (memcached's line).
pub const TOO_MANY: &str = "WATCHER_TOO_MANY log watcher limit reached";

impl Log {
    /// Is anyone watching `kind`? (The only cost on the request path.)
    #[inline]
    pub fn on(&self, kind: u16) -> bool {
        self.wanted.load(Ordering::Relaxed) & kind != 0
    }

    pub fn add(&self, flags: u16) -> Result<Arc<Watcher>, &'static str> {
        let mut ws = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        if ws.len() >= LIMIT {
            return Err(TOO_MANY);
        }
        let w = Arc::new(Watcher { flags, buf: Mutex::new(Pending::default()), ready: tokio::sync::Notify::new() });
        ws.push(w.clone());
        self.wanted.fetch_or(flags, Ordering::Relaxed);
        Ok(w)
    }

    pub fn remove(&self, w: &Arc<Watcher>) {
        let mut ws = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
        ws.retain(|x| !Arc::ptr_eq(x, w));
        self.wanted.store(ws.iter().fold(0, |f, x| f | x.flags), Ordering::Relaxed);
    }

    /// One log line of `kind`: `ts=.. gid=.. ` then what `body` writes
    /// (which ends with `\n`), to every watcher of that kind.
    pub fn emit(&self, kind: u16, body: impl FnOnce(&mut String)) {
        let gid = self.gid.fetch_add(1, Ordering::Relaxed) + 1;
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        // memcached prints the microseconds unpadded ("%lld.%d")
        let mut line = format!("ts={}.{} gid={gid} ", t.as_secs(), t.subsec_micros());
        body(&mut line);
        for w in self.watchers.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|w| w.flags & kind != 0) {
            w.push(line.as_bytes());
        }
    }
}

/// `item_get` (fetchers): `found` is the value's length on a hit.
pub fn log_get(log: &Log, key: &[u8], found: Option<usize>, cfd: i32) {
    log_fetch(log, key, found, None, cfd)
}

/// `item_get` with memcached's status for a stored item that was dead
/// (`expired`, `flushed`) instead of `not_found`.
pub fn log_fetch(log: &Log, key: &[u8], found: Option<usize>, dead: Option<crate::item::Dead>, cfd: i32) {
    use crate::item::Dead;
    use std::fmt::Write;
    log.emit(FETCHERS, |l| {
        l.push_str("type=item_get key=");
        uriencode(l, key);
        let (status, clsid, size) = match (found, dead) {
            (Some(n), _) => ("found", clsid(crate::item::item_ntotal(key.len(), n)), n),
            (None, Some(Dead::Expired)) => ("expired", 0, 0),
            (None, Some(Dead::Flushed)) => ("flushed", 0, 0),
            (None, None) => ("not_found", 0, 0),
        };
        let _ = writeln!(l, " status={status} clsid={clsid} cfd={cfd} size={size}");
    });
}

/// `item_store` (mutations): `cmd` is memcached's name of the store mode,
/// `ttl` seconds left (0 = none), `size` the value's length.
pub fn log_store(log: &Log, key: &[u8], status: &str, cmd: &str, ttl: u32, size: usize, cfd: i32) {
    use std::fmt::Write;
    log.emit(MUTATIONS, |l| {
        l.push_str("type=item_store key=");
        uriencode(l, key);
        let clsid = if size > 0 || status == "stored" { clsid(crate::item::item_ntotal(key.len(), size)) } else { 0 };
        let _ = writeln!(l, " status={status} cmd={cmd} ttl={ttl} clsid={clsid} cfd={cfd} size={size}");
    });
}

/// `conn_new` / `conn_close` (connevents). `peer` is `None` for a UNIX
/// socket (memcached: `rip=unix rport=0 transport=local`).
pub fn log_conn(log: &Log, peer: Option<std::net::SocketAddr>, close: Option<&str>, cfd: i32) {
    use std::fmt::Write;
    log.emit(CONNEVENTS, |l| {
        let (rip, rport, transport) = match peer {
            Some(a) => (a.ip().to_string(), a.port(), "tcp"),
            None => ("unix".to_string(), 0, "local"),
        };
        let _ = match close {
            None => writeln!(l, "type=conn_new rip={rip} rport={rport} transport={transport} cfd={cfd}"),
            Some(reason) => writeln!(l, "type=conn_close rip={rip} rport={rport} transport={transport} reason={reason} cfd={cfd}"),
        };
    });
}

/// memcached's `uriencode` of a key in a log line: every byte but
/// alphanumerics and `-._~` as `%XX`.
pub fn uriencode(out: &mut String, key: &[u8]) {
    for &b in key {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// The slab class memcached 1.6.18 would keep an item of `ntotal` bytes in
/// with its defaults (`-n 48`, `-f 1.25`, 8-byte alignment, 512 KiB largest
/// chunk), for the `clsid=` of log lines: tools group by it. 0 = none.
pub fn clsid(ntotal: usize) -> u32 {
    static DEFAULT: std::sync::OnceLock<crate::slabs::Classes> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(Default::default).id(ntotal) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_as_memcached_reads_them() {
        assert_eq!(kinds(&[]), Some(FETCHERS));
        assert_eq!(kinds(&[b"mutations", b"evictions"]), Some(MUTATIONS | EVICTIONS));
        assert_eq!(kinds(&[b"rawcmds"]), Some(SILENT));
        assert_eq!(kinds(&[b"fetchers", b"bogus"]), None);
    }

    #[test]
    fn slab_classes_are_memcached_defaults() {
        // memcached -vv: class 1 chunk 96, 2: 120, 3: 152, ...
        assert_eq!((clsid(1), clsid(96), clsid(97), clsid(120), clsid(121), clsid(152)), (1, 1, 2, 2, 3, 3));
        assert_eq!((clsid(394840), clsid(394841), clsid(524288)), (38, 39, 39));
    }

    #[test]
    fn a_full_buffer_counts_skipped_lines_and_reports_them() {
        let log = Log::default();
        let w = log.add(FETCHERS).unwrap();
        let big = "x".repeat(1000);
        let n = BUF / 1000 + 10;
        for _ in 0..n {
            log.emit(FETCHERS, |l| {
                l.push_str(&big);
                l.push('\n');
            });
        }
        let first = w.take();
        assert!(first.len() <= BUF);
        log.emit(FETCHERS, |l| l.push_str("type=x\n"));
        let next = String::from_utf8(w.take()).unwrap();
        assert!(next.starts_with("skipped=") && next.contains("type=x"), "{next}");
        log.emit(MUTATIONS, |l| l.push_str("type=y\n"));
        assert!(w.take().is_empty(), "a kind not asked for");
        log.remove(&w);
        assert!(!log.on(FETCHERS));
    }
}
