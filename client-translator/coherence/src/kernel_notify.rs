//! How the coherence translator tells the kernel what to forget: the narrow
//! interface the FUSE bridge implements (with fuser's notifier), so nothing
//! here knows FUSE.
//!
//! ```text
//!  upcall / holds' give-back / an append placed here ─> KernelCache ─ blocking thread ─> KernelNotify ─> kernel
//! ```
//!
//! Both calls write to `/dev/fuse` and may wait for the kernel's page locks:
//! they are made on a blocking thread, never on a fuser thread (the kernel
//! may wait on a request that thread would have to read) nor on a runtime
//! worker.

/// The kernel's caches, as the coherence translator sees them.
pub trait KernelNotify: Send + Sync + 'static {
    /// Drop inode `ino`'s attributes and, with `offset >= 0`, its cached
    /// pages from `offset` for `len` bytes (`len` 0: to the end).
    fn inval_inode(&self, ino: u64, offset: i64, len: i64) -> std::io::Result<()>;

    /// Drop the name `name` in directory `parent`.
    fn inval_entry(&self, parent: u64, name: &str) -> std::io::Result<()>;
}

/// The kernel answers ENOENT for what it no longer holds: nothing to do.
pub(crate) fn quiet(r: std::io::Result<()>) {
    if let Err(e) = r {
        if e.raw_os_error() != Some(libc::ENOENT) {
            tracing::debug!("kernel invalidation: {e}");
        }
    }
}
