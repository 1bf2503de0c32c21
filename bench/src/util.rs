//! Dropping the kernel's caches before a cold phase (`--cold`).

/// Drop the page, dentry and inode caches (root only).
pub fn drop_caches() -> anyhow::Result<()> {
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n")
        .map_err(|e| anyhow::anyhow!("--cold needs root to write /proc/sys/vm/drop_caches: {e}"))
}

/// Drop them when `cold`, else do nothing: what runs between the barriers.
pub fn maybe_drop(cold: bool) -> anyhow::Result<()> {
    if cold {
        drop_caches()
    } else {
        Ok(())
    }
}
