//! FALLOCATE: the modes the kernel passes on (allocate, keep-size, punch
//! hole, zero range), checked as Linux checks them, then one call on the
//! graph (stripe cuts the range per server).
//!
//! The kernel does its part around the call (`fuse_file_fallocate`): it
//! answers EOPNOTSUPP itself for collapse, insert and unshare; for a punch
//! or a zeroing it writes back its dirty pages of the range first and drops
//! them after a success; without keep-size it sets the new size; and it
//! drops its attributes either way. So the reply carries nothing.

use super::answer::answer;
use super::fs::GatewayFs;
use fuser::*;
use xlator::{Extent, FallocMode, FsError, Stateful};

impl GatewayFs {
    pub(super) fn fallocate_file(&self, ino: INodeNo, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let (co, loc) = (self.co.clone(), self.inodes.loc(ino.0));
        let work = async move {
            let range = Extent { offset, len: length };
            // vfs_fallocate's order: a bad range, an unknown mode, too far
            if length == 0 || offset > i64::MAX as u64 {
                return Err(FsError::EINVAL);
            }
            let mode = FallocMode::from_linux(mode).ok_or(FsError(libc::EOPNOTSUPP))?;
            range.end().ok_or(FsError::EFBIG)?;
            match co.fallocate(&loc?, mode, &[range]).await {
                // ENOSYS would make the kernel refuse every later fallocate
                // on this mount, whatever the servers learn to do
                Err(FsError::ENOSYS) => Err(FsError(libc::EOPNOTSUPP)),
                r => r.map(drop),
            }
        };
        answer(&self.rt, reply, work, |r, _| r.ok());
    }
}
