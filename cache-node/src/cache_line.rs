//! The CPU's prefetch hint: start loading a cache line now, use it later.
//! The shard tables (`table.rs`) and a multi-get's warm-up
//! (`store/prefetch.rs`) overlap their cache misses with it.

/// Starts loading the cache line at `p` into all cache levels. Any
/// address is fine: a prefetch does not fault and changes nothing.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` reads nothing architecturally; SSE is baseline on x86_64.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
