//! Executes meta commands (`mg ms md ma me mn`) as memcached 1.6.18 does:
//! return flags are echoed in request order, then the stale/win markers
//! (Z, X, W); `q` hides the "uninteresting" replies (EN for mg, HD for
//! ms/md/ma).

use std::io::Write;

use cache_proto::meta::{base64_encode, Kind, MetaCommand};
use cache_proto::text::{reply, StoreOp, NON_NUMERIC, NO_MEMORY};

use crate::node::{ArithResult, StoreResult};
use crate::out::Out;
use crate::session::{After, Session};
use crate::stats::C;
use crate::store::{Item, Value, ITEM_OVERHEAD};

/// What the item looked like (after this command's changes) for the return flags.
#[derive(Default)]
struct View {
    len: usize,
    flags: u32,
    cas: u64,
    /// remaining ttl, -1 = never
    ttl: i64,
    last_access: u32,
    fetched: bool,
    /// the key is returned base64-encoded (the item's `binary_key`)
    binary_key: bool,
}

/// " k<key>", and for a base64 key " k<base64> b" (memcached marks it so).
/// memcached 1.6.18 encodes the key of an item found as it was stored
/// (`ms` with `b` or not: `v`), whatever the request's `b`; a miss's key as
/// the request gave it.
fn put_key(out: &mut Vec<u8>, m: &MetaCommand<'_>, v: Option<&View>) {
    out.extend_from_slice(b" k");
    if v.map_or(m.has(b'b'), |v| v.binary_key) {
        out.extend_from_slice(base64_encode(&m.key).as_bytes());
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(&m.key);
    }
}

/// Appends the requested return flags (" f5 c12 ...").
fn ret_flags(out: &mut Vec<u8>, m: &MetaCommand<'_>, v: Option<&View>) {
    for &(f, tok) in &m.flags {
        match (f, v) {
            (b'O', _) => {
                out.extend_from_slice(b" O");
                out.extend_from_slice(tok);
            }
            (b'k', v) => put_key(out, m, v),
            (b's', Some(v)) => {
                let _ = write!(out, " s{}", v.len);
            }
            (b't', Some(v)) => {
                let _ = write!(out, " t{}", v.ttl);
            }
            (b'c', Some(v)) => {
                let _ = write!(out, " c{}", v.cas);
            }
            (b'f', Some(v)) => {
                let _ = write!(out, " f{}", v.flags);
            }
            (b'l', Some(v)) => {
                let _ = write!(out, " l{}", v.last_access);
            }
            (b'h', Some(v)) => {
                let _ = write!(out, " h{}", u8::from(v.fetched));
            }
            _ => {}
        }
    }
}

fn view(it: &Item, now: u32) -> View {
    View {
        len: it.value.len(),
        flags: it.flags,
        cas: it.cas,
        ttl: if it.exptime == 0 { -1 } else { i64::from(it.exptime) - i64::from(now) },
        last_access: now.saturating_sub(it.atime),
        fetched: it.fetched,
        binary_key: it.binary_key,
    }
}

impl Session {
    pub(crate) fn exec_meta(&mut self, m: MetaCommand<'_>, data: &[u8], o: &mut Out) -> After {
        self.cnt.inc(C::CmdMeta);
        if m.kind == Kind::Get {
            self.meta_get(&m, o);
            return After::Continue;
        }
        let out = o.buf();
        match m.kind {
            Kind::Noop => reply::line(out, "MN"),
            Kind::Get => unreachable!("executed above"),
            Kind::Set => self.meta_set(&m, data, out),
            Kind::Delete => self.meta_delete(&m, out),
            Kind::Arith => self.meta_arith(&m, out),
            Kind::Debug => self.meta_debug(&m, out),
        }
        After::Continue
    }

    fn meta_get(&mut self, m: &MetaCommand<'_>, o: &mut Out) {
        let node = &*self.node;
        let clock = &node.store.clock;
        let new_ttl = m.num_i32(b'T').map(|t| clock.realtime(t));
        let vivify = m.num_i32(b'N').map(|t| clock.realtime(t));
        let recache = m.num_i32(b'R');
        let bump = !m.has(b'u');
        let want_value = m.has(b'v');
        self.cnt.inc(C::CmdGet);
        // (view, value, won, stale, token already sent)
        let mut vivified = false;
        let r = node.store.with(&m.key, |slot| {
            let now = slot.now;
            if slot.peek().is_none() {
                let ttl = vivify?;
                let cas = slot.next_cas();
                if !slot.put(Item { win_sent: true, ..Item::new(Value::from(&[][..]), 0, ttl, now, cas) }) {
                    return None; // -M and full: nothing vivified, a plain miss
                }
                let it = slot.peek()?;
                vivified = true;
                return Some((view(it, now), want_value.then(|| it.value.clone()), true, false, false));
            }
            let it = if bump { slot.get() } else { slot.peek() }?;
            if let Some(t) = new_ttl {
                it.exptime = t;
            }
            let before = view(it, now);
            let token_sent = it.win_sent;
            let mut won = false;
            if it.stale && !it.win_sent {
                won = true;
                it.win_sent = true;
            } else if let Some(r) = recache {
                if !it.win_sent && it.exptime != 0 && i64::from(it.exptime) - i64::from(now) < i64::from(r) {
                    won = true;
                    it.win_sent = true;
                }
            }
            let stale = it.stale;
            if bump {
                it.fetched = true;
                it.atime = now;
            }
            let value = want_value.then(|| it.value.clone());
            Some((before, value, won, stale, token_sent))
        });
        // memcached logs the lookup: an item this mg vivified was not found
        self.log_get(&m.key, r.as_ref().filter(|_| !vivified).map(|(v, ..)| v.len));
        let out = o.buf();
        let Some((v, value, won, stale, token_sent)) = r else {
            self.cnt.inc(C::GetMisses);
            if !m.has(b'q') {
                out.extend_from_slice(b"EN");
                ret_flags(out, m, None);
                out.extend_from_slice(b"\r\n");
            }
            return;
        };
        self.cnt.inc(C::GetHits);
        if let Some(value) = &value {
            let _ = write!(out, "VA {}", value.len());
        } else {
            out.extend_from_slice(b"HD");
        }
        ret_flags(out, m, Some(&v));
        if token_sent {
            out.extend_from_slice(b" Z");
        }
        if stale {
            out.extend_from_slice(b" X");
        }
        if won {
            out.extend_from_slice(b" W");
        }
        out.extend_from_slice(b"\r\n");
        if let Some(value) = &value {
            o.value(value);
            o.buf().extend_from_slice(b"\r\n");
        }
    }

    fn meta_set(&mut self, m: &MetaCommand<'_>, data: &[u8], out: &mut Vec<u8>) {
        let node = &*self.node;
        let op = match m.mode() {
            Some(b'E') => StoreOp::Add,
            Some(b'A') => StoreOp::Append,
            Some(b'P') => StoreOp::Prepend,
            Some(b'R') => StoreOp::Replace,
            _ => StoreOp::Set,
        };
        let exptime = node.store.clock.realtime(m.num_i32(b'T').unwrap_or(0));
        let cas_in = m.num_u64(b'C').unwrap_or(0);
        let op = if cas_in != 0 && op == StoreOp::Set { StoreOp::Cas } else { op };
        let looked = self.store_lookup(&m.key);
        let r = node.store(&mut self.cnt, op, &m.key, m.flags_u32().unwrap_or(0), exptime, data, cas_in, m.has(b'b'));
        self.log_store(looked, op, cas_in, &m.key, exptime, data.len(), &r);
        let (code, cas) = match r {
            StoreResult::Stored(c) => ("HD", c),
            StoreResult::NotStored => ("NS", 0),
            StoreResult::Exists => ("EX", 0),
            StoreResult::NotFound => ("NF", 0),
            StoreResult::NoMemory => return reply::line(out, NO_MEMORY),
        };
        if code == "HD" && m.has(b'q') {
            return;
        }
        out.extend_from_slice(code.as_bytes());
        let v = View { cas, len: data.len(), ..View::default() };
        for &(f, tok) in &m.flags {
            match f {
                b'O' => {
                    out.extend_from_slice(b" O");
                    out.extend_from_slice(tok);
                }
                b'k' => put_key(out, m, None),
                // memcached returns the flag on every outcome: c0 when nothing was stored
                b'c' => {
                    let _ = write!(out, " c{}", v.cas);
                }
                _ => {}
            }
        }
        out.extend_from_slice(b"\r\n");
    }

    fn meta_delete(&mut self, m: &MetaCommand<'_>, out: &mut Vec<u8>) {
        let node = &*self.node;
        let cas_in = m.num_u64(b'C').unwrap_or(0);
        let code = if m.has(b'I') {
            let ttl = m.num_i32(b'T').map(|t| node.store.clock.realtime(t));
            node.store.with(&m.key, |slot| match slot.get() {
                None => "NF",
                Some(it) if cas_in != 0 && it.cas != cas_in => "EX",
                Some(it) => {
                    it.stale = true;
                    it.win_sent = false;
                    if let Some(t) = ttl {
                        it.exptime = t;
                    }
                    "HD"
                }
            })
        } else {
            match node.delete(&mut self.cnt, &m.key, cas_in) {
                StoreResult::NotFound => "NF",
                StoreResult::Exists => "EX",
                _ => "HD",
            }
        };
        if code == "HD" && m.has(b'q') {
            return;
        }
        out.extend_from_slice(code.as_bytes());
        ret_flags(out, m, None);
        out.extend_from_slice(b"\r\n");
    }

    fn meta_arith(&mut self, m: &MetaCommand<'_>, out: &mut Vec<u8>) {
        let node = &*self.node;
        let clock = &node.store.clock;
        let incr = !matches!(m.mode(), Some(b'D' | b'-'));
        let delta = m.num_u64(b'D').unwrap_or(1);
        let create = m.num_i32(b'N').map(|t| (m.num_u64(b'J').unwrap_or(0), clock.realtime(t)));
        let cas_in = m.num_u64(b'C').unwrap_or(0);
        match node.arith(&mut self.cnt, incr, &m.key, delta, create, cas_in) {
            ArithResult::Value(n, _) => {
                let ttl = m.num_i32(b'T').map(|t| clock.realtime(t));
                let v = node.store.with(&m.key, |slot| {
                    let now = slot.now;
                    slot.peek().map(|it| {
                        if let Some(t) = ttl {
                            it.exptime = t;
                        }
                        view(it, now)
                    })
                });
                // memcached echoes ma's key as the request gave it
                let v = View { binary_key: m.has(b'b'), ..v.unwrap_or_default() };
                if m.has(b'v') {
                    let s = n.to_string();
                    let _ = write!(out, "VA {}", s.len());
                    ret_flags(out, m, Some(&v));
                    out.extend_from_slice(b"\r\n");
                    reply::line(out, &s);
                } else if !m.has(b'q') {
                    out.extend_from_slice(b"HD");
                    ret_flags(out, m, Some(&v));
                    out.extend_from_slice(b"\r\n");
                }
            }
            ArithResult::NotFound => {
                out.extend_from_slice(b"NF");
                ret_flags(out, m, None);
                out.extend_from_slice(b"\r\n");
            }
            ArithResult::Exists => {
                out.extend_from_slice(b"EX");
                ret_flags(out, m, None);
                out.extend_from_slice(b"\r\n");
            }
            ArithResult::NonNumeric => reply::line(out, NON_NUMERIC),
        }
    }

    fn meta_debug(&mut self, m: &MetaCommand<'_>, out: &mut Vec<u8>) {
        let r = self.node.store.with(&m.key, |slot| {
            let now = slot.now;
            let n = m.key.len();
            slot.peek().map(|it| (view(it, now), n + it.value.len() + ITEM_OVERHEAD))
        });
        match r {
            None => reply::line(out, "EN"),
            Some((v, size)) => {
                out.extend_from_slice(b"ME ");
                if v.binary_key {
                    out.extend_from_slice(base64_encode(&m.key).as_bytes());
                } else {
                    out.extend_from_slice(&m.key);
                }
                let fetch = if v.fetched { "yes" } else { "no" };
                let _ = write!(
                    out,
                    " exp={} la={} cas={} fetch={fetch} cls=1 size={size}\r\n",
                    v.ttl, v.last_access, v.cas
                );
            }
        }
    }
}
