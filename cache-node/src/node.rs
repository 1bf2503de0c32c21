//! The node: store + stats + settings, and the memcached semantics every
//! protocol shares (store modes, CAS, incr/decr, touch, delete).

use cache_proto::num::item_number;
use cache_proto::text::StoreOp;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::slabs::Classes;
use crate::stats::{Counters, Stats, C};
use crate::store::{Dead, Item, Store, Value};

/// One cache node's shared state; sessions hold an `Arc<Node>`.
pub struct Node {
    pub store: Store,
    pub stats: Stats,
    pub config: Config,
    pub metrics: Option<Metrics>,
    /// the port we actually bound (for `stats settings`)
    pub port: std::sync::atomic::AtomicU32,
    /// the `shutdown` command (with `-A`) asks `run` to stop through this
    pub shutdown: tokio::sync::Notify,
    /// the open connections, for `stats conns`
    pub conns: crate::conns::Table,
    /// who holds the `-c` slots, by peer; what was refused, shed or timed
    /// out before logging in (`admission.rs`)
    pub crowd: std::sync::Arc<daemon::Crowd>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum StoreResult {
    Stored(u64),
    NotStored,
    Exists,
    NotFound,
    /// `-M` and no room: memcached's "out of memory storing object"
    NoMemory,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ArithResult {
    Value(u64, u64),
    NotFound,
    NonNumeric,
    Exists,
}

impl Node {
    pub fn new(config: Config) -> Node {
        let shards = (config.threads * 16).clamp(16, 1024);
        let mut store = Store::new(config.memory_bytes, shards).with_classes(Classes::new(config.slab_min, config.slab_factor));
        if !config.lru_maintainer {
            store = store.without_maintainer();
        }
        let crowd = daemon::Crowd::new(config.crowd_limits());
        Node {
            crowd,
            store: if config.evictions { store } else { store.without_evictions() },
            stats: Stats::default(),
            metrics: None,
            config,
            port: Default::default(),
            shutdown: tokio::sync::Notify::new(),
            conns: Default::default(),
        }
    }

    /// Starts the node's LRU maintainer thread (`store/maintainer.rs`). It
    /// holds the node weakly and ends within a sweep's idle wait of the
    /// node's end.
    pub fn start_maintainer(self: &std::sync::Arc<Self>) -> std::io::Result<()> {
        let node = std::sync::Arc::downgrade(self);
        let t = std::thread::Builder::new().name("lru-maintainer".into()).spawn(move || loop {
            let Some(n) = node.upgrade() else { return };
            let sweep = n.store.maintain();
            drop(n);
            // Items moved: the region moved on; sweep it again right away
            // (until it is clean). Otherwise wait for stores to use it up.
            if sweep.moved == 0 {
                std::thread::park_timeout(crate::store::maintainer::IDLE);
            }
        })?;
        let _ = self.store.maintainer.set(t.thread().clone());
        Ok(())
    }

    /// set/add/replace/append/prepend/cas. `cas_in` != 0 turns set (and
    /// binary append/prepend/replace) into compare-and-swap, as in memcached.
    #[allow(clippy::too_many_arguments)]
    pub fn store(
        &self,
        cnt: &mut Counters,
        op: StoreOp,
        key: &[u8],
        flags: u32,
        exptime: u32,
        data: &[u8],
        cas_in: u64,
        binary_key: bool,
    ) -> StoreResult {
        cnt.inc(C::CmdSet);
        let max = self.config.max_value();
        let r = self.store.with(key, |slot| {
            let now = slot.now;
            let cur = slot.get();
            let cur_cas = cur.as_ref().map(|i| i.cas);
            if op == StoreOp::Cas || (cas_in != 0 && op != StoreOp::Add) {
                match cur_cas {
                    None => {
                        if op == StoreOp::Cas {
                            cnt.inc(C::CasMisses);
                        }
                        return StoreResult::NotFound;
                    }
                    Some(c) if c != cas_in => {
                        if op == StoreOp::Cas {
                            cnt.inc(C::CasBadval);
                        }
                        return StoreResult::Exists;
                    }
                    Some(_) => {
                        if op == StoreOp::Cas {
                            cnt.inc(C::CasHits);
                        }
                    }
                }
            }
            let item = match op {
                StoreOp::Add if cur.is_some() => return StoreResult::NotStored,
                StoreOp::Replace | StoreOp::Append | StoreOp::Prepend if cur.is_none() => {
                    return StoreResult::NotStored
                }
                StoreOp::Append | StoreOp::Prepend => {
                    let old = cur.unwrap();
                    if old.value.len() + data.len() > max {
                        return StoreResult::NotStored;
                    }
                    let mut v = Vec::with_capacity(old.value.len() + data.len());
                    if op == StoreOp::Append {
                        v.extend_from_slice(&old.value);
                        v.extend_from_slice(data);
                    } else {
                        v.extend_from_slice(data);
                        v.extend_from_slice(&old.value);
                    }
                    let (f, e) = (old.flags, old.exptime);
                    Item::new(v.into(), f, e, now, 0)
                }
                _ => Item::new(data.into(), flags, exptime, now, 0),
            };
            let cas = slot.next_cas();
            if !slot.put(Item { cas, binary_key, ..item }) {
                return StoreResult::NoMemory;
            }
            StoreResult::Stored(cas)
        });
        cnt.inc(match r {
            StoreResult::Stored(_) => C::Stored,
            StoreResult::NotStored => C::NotStored,
            StoreResult::Exists => C::Exists,
            StoreResult::NotFound => C::NotFound,
            StoreResult::NoMemory => C::StoreNoMemory,
        });
        r
    }

    /// A value over the item limit arrived: memcached drops the old item for `set`.
    pub fn too_large(&self, cnt: &mut Counters, is_set: bool, key: &[u8]) {
        cnt.inc(C::StoreTooLarge);
        if is_set {
            self.store.with(key, |slot| slot.remove());
        }
    }

    /// incr/decr with memcached's rules: 64-bit wrap on incr, floor 0 on decr,
    /// the new number written in place (space padded) when it is not longer.
    /// `create` = (initial value, exptime) makes a missing key spring into being.
    pub fn arith(
        &self,
        cnt: &mut Counters,
        incr: bool,
        key: &[u8],
        delta: u64,
        create: Option<(u64, u32)>,
        cas_in: u64,
    ) -> ArithResult {
        let r = self.store.with(key, |slot| {
            let now = slot.now;
            let Some(it) = slot.get() else {
                return match create {
                    Some((initial, exptime)) => {
                        let cas = slot.next_cas();
                        if !slot.put(Item::new(initial.to_string().as_bytes().into(), 0, exptime, now, cas)) {
                            return ArithResult::NotFound; // -M and full: nothing was created
                        }
                        ArithResult::Value(initial, cas)
                    }
                    None => ArithResult::NotFound,
                };
            };
            if cas_in != 0 && it.cas != cas_in {
                return ArithResult::Exists;
            }
            let Some(v) = item_number(&it.value) else { return ArithResult::NonNumeric };
            let nv = if incr { v.wrapping_add(delta) } else { v.saturating_sub(delta) };
            let mut s = nv.to_string().into_bytes();
            let old_len = it.value.len();
            if s.len() <= old_len {
                s.resize(old_len, b' ');
            }
            let cas = slot.next_cas();
            if let Some(it) = slot.peek() {
                it.cas = cas;
                it.time = now;
            }
            slot.set_value(s.into());
            ArithResult::Value(nv, cas)
        });
        let (hit, miss) = if incr { (C::IncrHits, C::IncrMisses) } else { (C::DecrHits, C::DecrMisses) };
        match r {
            ArithResult::NotFound => cnt.inc(miss),
            ArithResult::Value(..) => cnt.inc(hit),
            _ => {}
        }
        r
    }

    /// delete; `cas_in` != 0 deletes only that version.
    pub fn delete(&self, cnt: &mut Counters, key: &[u8], cas_in: u64) -> StoreResult {
        let r = self.store.with(key, |slot| match slot.get() {
            None => StoreResult::NotFound,
            Some(it) if cas_in != 0 && it.cas != cas_in => StoreResult::Exists,
            Some(_) => {
                slot.remove();
                StoreResult::Stored(0)
            }
        });
        cnt.inc(if r == StoreResult::NotFound { C::DeleteMisses } else { C::DeleteHits });
        r
    }

    /// touch: new exptime (already converted to server time).
    pub fn touch(&self, cnt: &mut Counters, key: &[u8], exptime: u32) -> bool {
        cnt.inc(C::CmdTouch);
        let hit = self.store.with(key, |slot| match slot.get() {
            Some(it) => {
                it.exptime = exptime;
                true
            }
            None => false,
        });
        cnt.inc(if hit { C::TouchHits } else { C::TouchMisses });
        hit
    }

    /// get / gat: (value, flags, cas) of a live item.
    pub fn get(&self, cnt: &mut Counters, key: &[u8], touch: Option<u32>) -> Option<(Value, u32, u64)> {
        let mut r = None;
        self.get_with(cnt, key, touch, |it| r = Some((it.value.clone(), it.flags, it.cas)));
        r
    }

    /// get / gat handing the live item to `f` under its shard lock (the
    /// text get pins its value there for the reply's `writev`, `out.rs`).
    /// Returns whether it was a hit; `dead`
    /// learns why a stored item was not (memcached's `watch` statuses).
    pub fn get_with(&self, cnt: &mut Counters, key: &[u8], touch: Option<u32>, f: impl FnOnce(&Item)) -> bool {
        self.get_dead(cnt, key, touch, f).0
    }

    /// [`get_with`](Self::get_with), also saying why a stored item was dead.
    pub fn get_dead(&self, cnt: &mut Counters, key: &[u8], touch: Option<u32>, f: impl FnOnce(&Item)) -> (bool, Option<Dead>) {
        cnt.inc(C::CmdGet);
        if touch.is_some() {
            cnt.inc(C::CmdTouch);
        }
        let (hit, dead) = self.store.read(key, |slot| {
            let now = slot.now;
            let Some(it) = slot.get() else { return (false, slot.dead) };
            if let Some(e) = touch {
                it.exptime = e;
            }
            it.fetched = true;
            it.atime = now;
            f(it);
            (true, None)
        });
        cnt.inc(if hit { C::GetHits } else { C::GetMisses });
        match dead {
            Some(Dead::Expired) => cnt.inc(C::GetExpired),
            Some(Dead::Flushed) => cnt.inc(C::GetFlushed),
            None => {}
        }
        if touch.is_some() {
            cnt.inc(if hit { C::TouchHits } else { C::TouchMisses });
        }
        (hit, dead)
    }

    /// flush_all with memcached's delay rule (<= 0: now).
    pub fn flush_all(&self, cnt: &mut Counters, delay: i32) {
        cnt.inc(C::CmdFlush);
        if delay > 0 {
            self.store.flush(Some(self.store.clock.realtime(delay)));
        } else {
            self.store.flush(None);
        }
    }
}
