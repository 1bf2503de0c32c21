//! What every connection on one verbs device shares: the device, its
//! registered buffer pools and its registration caches, opened once per
//! device and kept while any connection uses it.

use super::device::Device;
use super::mrcache::MrCache;
use super::pool::Pool;
use rdma_sys::*;
use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Access for memory only this process's HCA touches (receives, Read targets,
/// Send and Write sources). Servers register nothing else.
pub(crate) fn local_access() -> ibv_access_flags {
    ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
}

/// Access for client buffers a server writes reply bulk into or reads request bulk from.
pub(crate) fn exposed_access() -> ibv_access_flags {
    ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
        | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
        | ibv_access_flags::IBV_ACCESS_REMOTE_READ
}

/// Everything connections on one device share.
pub(crate) struct Domain {
    pub dev: Arc<Device>,
    /// Send and receive buffers, server-side Read targets: one MR per slab, lkey only.
    pub local: Arc<Pool>,
    /// Client buffers advertised to a server: one MR per buffer, so an rkey
    /// reaches exactly that buffer and nothing next to it.
    pub exposed: Arc<Pool>,
    /// Large request bulks a client lets the server read (REMOTE_READ only).
    pub read_cache: MrCache,
    /// Large reply bulks a server writes from (no remote access at all).
    pub local_cache: MrCache,
}

impl Domain {
    /// The shared domain of the device behind an rdma_cm id's verbs context.
    pub(crate) fn for_verbs(verbs: *mut ibv_context, cache_bytes: usize) -> io::Result<Arc<Domain>> {
        if verbs.is_null() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "rdma_cm id is not bound to a device"));
        }
        let name = unsafe { CStr::from_ptr(ibv_get_device_name((*verbs).device)).to_string_lossy().into_owned() };
        static DOMAINS: OnceLock<Mutex<HashMap<String, Weak<Domain>>>> = OnceLock::new();
        let mut map = DOMAINS.get_or_init(Default::default).lock().unwrap();
        if let Some(d) = map.get(&name).and_then(Weak::upgrade) {
            return Ok(d);
        }
        let dev = Arc::new(Device::open(&name)?);
        let d = Arc::new(Domain {
            local: Pool::new(dev.clone(), local_access(), false),
            exposed: Pool::new(dev.clone(), exposed_access(), true),
            read_cache: MrCache::new(dev.clone(), ibv_access_flags::IBV_ACCESS_REMOTE_READ, cache_bytes),
            local_cache: MrCache::new(dev.clone(), ibv_access_flags(0), cache_bytes),
            dev,
        });
        map.insert(name, Arc::downgrade(&d));
        Ok(d)
    }
}
