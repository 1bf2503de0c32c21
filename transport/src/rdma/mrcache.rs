//! Registrations of large application buffers, made once and reused.
//!
//! Above the copy threshold it is cheaper to register the caller's `Bytes`
//! than to copy it into a pool buffer. A classic pin-down cache keys MRs by
//! virtual address and goes stale when the memory is freed and the address
//! reused. Here every entry holds a clone of the `Bytes` it registered: the
//! memory cannot be freed (nor, `Bytes` being immutable, changed) while the
//! entry exists, so an (address, length) hit always means the same bytes.
//! Entries are evicted LRU by total size; an MR still used by an in-flight
//! operation lives on through its `Arc` until that operation completes.

use super::device::{Device, Mr};
use bytes::Bytes;
use rdma_sys::ibv_access_flags;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) struct CachedMr {
    pub mr: Mr,
    pub data: Bytes,
}

#[derive(Default)]
struct Inner {
    map: HashMap<(usize, usize), Arc<CachedMr>>,
    lru: VecDeque<(usize, usize)>,
    bytes: usize,
}

pub(crate) struct MrCache {
    dev: Arc<Device>,
    access: ibv_access_flags,
    cap_bytes: usize,
    inner: Mutex<Inner>,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl MrCache {
    pub(crate) fn new(dev: Arc<Device>, access: ibv_access_flags, cap_bytes: usize) -> MrCache {
        MrCache { dev, access, cap_bytes, inner: Mutex::default(), hits: AtomicU64::new(0), misses: AtomicU64::new(0) }
    }

    pub(crate) fn get(&self, data: &Bytes) -> io::Result<Arc<CachedMr>> {
        let key = (data.as_ptr() as usize, data.len());
        {
            let mut g = self.inner.lock().unwrap();
            if let Some(e) = g.map.get(&key).cloned() {
                g.lru.retain(|k| *k != key);
                g.lru.push_back(key);
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(e);
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // Register outside the lock: pinning a large buffer takes a while.
        let e = Arc::new(CachedMr { mr: self.dev.register(data.as_ptr(), data.len(), self.access)?, data: data.clone() });
        if data.len() <= self.cap_bytes {
            let mut g = self.inner.lock().unwrap();
            if g.map.insert(key, e.clone()).is_none() {
                g.lru.push_back(key);
                g.bytes += key.1;
            }
            while g.bytes > self.cap_bytes {
                let Some(old) = g.lru.pop_front() else { break };
                if g.map.remove(&old).is_some() {
                    g.bytes -= old.1;
                }
            }
        }
        Ok(e)
    }
}
