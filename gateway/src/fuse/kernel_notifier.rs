//! The kernel's side of [`coherence::KernelNotify`]: fuser's notifier,
//! which writes invalidations to `/dev/fuse` (the coherence translator
//! calls it on a blocking thread, never on a fuser thread).

use coherence::KernelNotify;
use fuser::{INodeNo, Notifier};
use std::ffi::OsStr;

/// The mount's notifier, as the coherence translator's [`KernelNotify`].
pub struct Kernel(pub Notifier);

impl KernelNotify for Kernel {
    fn inval_inode(&self, ino: u64, offset: i64, len: i64) -> std::io::Result<()> {
        self.0.inval_inode(INodeNo(ino), offset, len)
    }

    fn inval_entry(&self, parent: u64, name: &str) -> std::io::Result<()> {
        self.0.inval_entry(INodeNo(parent), OsStr::new(name))
    }
}
