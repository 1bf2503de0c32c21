//! fallocate on this server's copy of a file: one fallocate(2) per extent
//! stripe sent here (the units this server holds), through the cached data
//! fd a write uses (opened without following links).

use super::sys::{self, err, raw};
use super::Posix;
use std::io;
use xlator::*;

impl Posix {
    /// Apply `mode` to each of `ranges` in order; the copy's attributes
    /// after. An extent that fails stops the call with its error (the
    /// earlier ones stay done, as a local fallocate that runs out of space
    /// part-way leaves what it allocated). A full disk first lets go of
    /// removed files held for gateways' opens, then tries again, as a
    /// write does.
    pub fn fallocate(&self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> io::Result<Attr> {
        if ranges.len() > MAX_EXTENTS || ranges.iter().any(|r| r.len == 0) {
            return Err(err(libc::EINVAL));
        }
        if ranges.iter().any(|r| r.end().is_none()) {
            return Err(err(libc::EFBIG));
        }
        let (fd, fid) = self.data_fd(loc)?;
        for r in ranges {
            match sys::fallocate(raw(&fd), mode.to_linux(), r.offset, r.len) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) && self.fds().release_all_holds() > 0 => {
                    sys::fallocate(raw(&fd), mode.to_linux(), r.offset, r.len)?
                }
                r => r?,
            }
        }
        // Files reached through the cache always have their per-fid link.
        Ok(super::attr_of(&sys::fstat(raw(&fd))?, fid, fid != FileId::ROOT))
    }
}
