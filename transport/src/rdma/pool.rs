//! Pre-registered buffers in size classes (the seeds' zone allocator).
//!
//! Memory is allocated in slabs and registered once; a [`PoolBuf`] is an
//! RAII guard that returns its buffer to the class free list on drop. A slab
//! lives as long as any of its buffers (each holds an `Arc`), so a buffer
//! handed to the application inside a `Bytes` (`Bytes::from_owner`) keeps its
//! registration valid for exactly as long as it is used: there is no
//! address-keyed registration cache that could go stale.
//!
//! Requests larger than the largest class, or a class whose free memory is
//! over its cap, get a one-off registered buffer that is freed on drop.

use super::device::{Device, Mr};
use rdma_sys::ibv_access_flags;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::{Arc, Mutex};

/// Buffer sizes. A request is served from the smallest class that fits.
pub const SIZE_CLASSES: [usize; 7] = [4 << 10, 8 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];
/// Bytes per slab for the small classes (fewer, larger registrations).
const SLAB_BYTES: usize = 1 << 20;
/// Free memory a class keeps for reuse; beyond it, returned buffers are freed.
const CLASS_FREE_CAP: usize = 64 << 20;

struct Slab {
    mem: *mut u8,
    layout: Layout,
    /// One MR for the whole slab, or one per buffer (`exposed` pools).
    mrs: Vec<Mr>,
}

unsafe impl Send for Slab {}
unsafe impl Sync for Slab {}

impl Drop for Slab {
    fn drop(&mut self) {
        self.mrs.clear(); // deregister before the memory goes
        unsafe { dealloc(self.mem, self.layout) }
    }
}

struct Slot {
    ptr: *mut u8,
    lkey: u32,
    rkey: u32,
    _slab: Arc<Slab>,
}

unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

pub(crate) struct Pool {
    dev: Arc<Device>,
    access: ibv_access_flags,
    per_buffer_mr: bool,
    free: Vec<Mutex<Vec<Slot>>>,
}

impl Pool {
    pub(crate) fn new(dev: Arc<Device>, access: ibv_access_flags, per_buffer_mr: bool) -> Arc<Pool> {
        Arc::new(Pool { dev, access, per_buffer_mr, free: SIZE_CLASSES.iter().map(|_| Mutex::new(Vec::new())).collect() })
    }

    /// A buffer of at least `len` bytes (its `len()` is set to `len`).
    pub(crate) fn get(self: &Arc<Self>, len: usize) -> io::Result<PoolBuf> {
        let Some(class) = SIZE_CLASSES.iter().position(|&c| c >= len) else {
            let slot = self.slab(len.max(1), 1)?.pop().unwrap();
            return Ok(PoolBuf { slot: Some(slot), cap: len.max(1), len, class: None, pool: self.clone() });
        };
        let size = SIZE_CLASSES[class];
        let slot = {
            let mut free = self.free[class].lock().unwrap();
            if free.is_empty() {
                let n = (SLAB_BYTES / size).max(1);
                *free = self.slab(size, n)?;
            }
            free.pop().unwrap()
        };
        Ok(PoolBuf { slot: Some(slot), cap: size, len, class: Some(class), pool: self.clone() })
    }

    fn slab(&self, size: usize, n: usize) -> io::Result<Vec<Slot>> {
        let layout = Layout::from_size_align(size * n, 4096).map_err(|e| io::Error::other(e.to_string()))?;
        // Zeroed: a buffer the peer did not fully write must still be initialised memory.
        let mem = unsafe { alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "slab allocation failed"));
        }
        let mut slab = Slab { mem, layout, mrs: Vec::new() };
        if self.per_buffer_mr {
            for i in 0..n {
                slab.mrs.push(self.dev.register(unsafe { mem.add(i * size) }, size, self.access)?);
            }
        } else {
            slab.mrs.push(self.dev.register(mem, size * n, self.access)?);
        }
        let slab = Arc::new(slab);
        Ok((0..n)
            .map(|i| {
                let mr = &slab.mrs[if self.per_buffer_mr { i } else { 0 }];
                Slot { ptr: unsafe { mem.add(i * size) }, lkey: mr.lkey(), rkey: mr.rkey(), _slab: slab.clone() }
            })
            .collect())
    }
}

/// A registered buffer on loan from a [`Pool`]; goes back on drop.
pub(crate) struct PoolBuf {
    slot: Option<Slot>,
    cap: usize,
    len: usize,
    class: Option<usize>,
    pool: Arc<Pool>,
}

impl PoolBuf {
    pub(crate) fn addr(&self) -> u64 {
        self.slot.as_ref().unwrap().ptr as u64
    }
    pub(crate) fn lkey(&self) -> u32 {
        self.slot.as_ref().unwrap().lkey
    }
    pub(crate) fn rkey(&self) -> u32 {
        self.slot.as_ref().unwrap().rkey
    }
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap);
        self.len = len;
    }
    /// The whole buffer, for filling before a Send or after a Read.
    pub(crate) fn full_mut(&mut self) -> &mut [u8] {
        // Safety: the slot is ours alone until dropped; the HCA only touches
        // it while a work request holding this guard is outstanding.
        unsafe { std::slice::from_raw_parts_mut(self.slot.as_ref().unwrap().ptr, self.cap) }
    }
    pub(crate) fn full(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.slot.as_ref().unwrap().ptr, self.cap) }
    }
}

impl AsRef<[u8]> for PoolBuf {
    fn as_ref(&self) -> &[u8] {
        &self.full()[..self.len]
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        let (Some(slot), Some(class)) = (self.slot.take(), self.class) else { return };
        let mut free = self.pool.free[class].lock().unwrap();
        if free.len() * SIZE_CLASSES[class] < CLASS_FREE_CAP {
            free.push(slot);
        }
    }
}
