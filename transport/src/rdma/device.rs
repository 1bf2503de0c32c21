//! One opened verbs device: its context, one protection domain, and memory
//! registration. The pools and registration caches every connection on a
//! device shares are its [`Domain`](super::domain::Domain) (`domain.rs`).
//!
//! We open our own context instead of borrowing rdma_cm's (`id->verbs`) so
//! that pools and registrations outlive any one connection id; rdma_cm only
//! addresses and connects, the queue pairs live on this context.

use rdma_sys::*;
use std::ffi::CStr;
use std::io;
use std::sync::Arc;

pub(crate) struct Device {
    pub ctx: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub _name: String,
    /// Outstanding RDMA Reads per QP the device allows (`max_qp_rd_atom`).
    pub max_rd_atom: u8,
}

// The verbs objects are thread-safe by the libibverbs contract.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Drop for Device {
    fn drop(&mut self) {
        unsafe {
            ibv_dealloc_pd(self.pd);
            ibv_close_device(self.ctx);
        }
    }
}

pub(crate) fn last_err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

pub(crate) fn check(rc: i32, what: &str) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else if rc > 0 {
        // verbs calls return a positive errno; rdma_cm calls return -1 + errno
        let e = io::Error::from_raw_os_error(rc);
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Err(last_err(what))
    }
}

impl Device {
    pub(crate) fn open(name: &str) -> io::Result<Device> {
        unsafe {
            let mut n = 0;
            let list = ibv_get_device_list(&mut n);
            if list.is_null() {
                return Err(last_err("ibv_get_device_list"));
            }
            let mut found = std::ptr::null_mut();
            for i in 0..n as usize {
                let d = *list.add(i);
                if CStr::from_ptr(ibv_get_device_name(d)).to_string_lossy() == name {
                    found = d;
                }
            }
            let ctx = if found.is_null() { std::ptr::null_mut() } else { ibv_open_device(found) };
            ibv_free_device_list(list);
            if ctx.is_null() {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("cannot open RDMA device {name}")));
            }
            let pd = ibv_alloc_pd(ctx);
            if pd.is_null() {
                let e = last_err("ibv_alloc_pd");
                ibv_close_device(ctx);
                return Err(e);
            }
            let mut attr: ibv_device_attr = std::mem::zeroed();
            let max_rd_atom = if ibv_query_device(ctx, &mut attr) == 0 { attr.max_qp_rd_atom.clamp(1, 16) as u8 } else { 1 };
            Ok(Device { ctx, pd, _name: name.to_string(), max_rd_atom })
        }
    }

    pub(crate) fn query_port(&self, port: u8) -> io::Result<ibv_port_attr> {
        unsafe {
            let mut attr: ibv_port_attr = std::mem::zeroed();
            check(___ibv_query_port(self.ctx, port, &mut attr), "ibv_query_port")?;
            Ok(attr)
        }
    }

    /// Register `len` bytes at `addr`; the MR deregisters itself on drop.
    pub(crate) fn register(self: &Arc<Self>, addr: *const u8, len: usize, access: ibv_access_flags) -> io::Result<Mr> {
        let mr = unsafe { ibv_reg_mr(self.pd, addr as *mut _, len, access.0 as i32) };
        if mr.is_null() {
            return Err(last_err(&format!("ibv_reg_mr({len} bytes)")));
        }
        Ok(Mr { mr, _dev: self.clone() })
    }
}

/// A registered memory region; deregistered on drop (the memory itself is
/// owned by whoever holds the Mr next to it).
pub(crate) struct Mr {
    mr: *mut ibv_mr,
    _dev: Arc<Device>,
}

unsafe impl Send for Mr {}
unsafe impl Sync for Mr {}

impl Mr {
    pub(crate) fn lkey(&self) -> u32 {
        unsafe { (*self.mr).lkey }
    }
    pub(crate) fn rkey(&self) -> u32 {
        unsafe { (*self.mr).rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        unsafe {
            ibv_dereg_mr(self.mr);
        }
    }
}

/// Whether this machine has a usable RDMA device (for `--transport auto`).
/// False when the kernel has no RDMA support at all (ENOSYS) or lists none.
pub fn device_present() -> bool {
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            return false;
        }
        ibv_free_device_list(list);
        n > 0
    }
}

/// See `rdma::measure_copy_vs_register`.
pub(crate) fn measure_copy_vs_register(len: usize, rounds: usize) -> io::Result<(u64, u64)> {
    let name = unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        if list.is_null() || n == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no RDMA device"));
        }
        let name = CStr::from_ptr(ibv_get_device_name(*list)).to_string_lossy().into_owned();
        ibv_free_device_list(list);
        name
    };
    let dev = Arc::new(Device::open(&name)?);
    let src = vec![7u8; len];
    let mut dst = vec![0u8; len];
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut copy = Vec::new();
    let mut reg = Vec::new();
    for _ in 0..rounds.max(1) {
        let t = std::time::Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&dst);
        copy.push(t.elapsed().as_nanos() as u64);
        let t = std::time::Instant::now();
        let mr = dev.register(src.as_ptr(), len, ibv_access_flags::IBV_ACCESS_REMOTE_READ)?;
        drop(mr);
        reg.push(t.elapsed().as_nanos() as u64);
    }
    Ok((median(copy), median(reg)))
}
