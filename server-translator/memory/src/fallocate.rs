//! fallocate in memory: posix's answers without the space (this leaf keeps
//! every byte, so allocating changes nothing but, without keep-size, the
//! size; punching and zeroing write zeros).

use crate::tree::{err, Content, Fs};
use crate::MAX_FILE;
use xlator::*;

impl Fs {
    /// Apply `mode` to each of `ranges` in order, checked as posix checks
    /// them; the file's attributes after (nlink as a write's answer).
    pub fn fallocate(&mut self, loc: &Loc, mode: FallocMode, ranges: &[Extent]) -> FsResult<Attr> {
        if ranges.len() > MAX_EXTENTS || ranges.iter().any(|r| r.len == 0) {
            return err(libc::EINVAL);
        }
        if ranges.iter().any(|r| r.end().is_none()) {
            return err(libc::EFBIG);
        }
        let fid = self.data(loc)?;
        let i = self.inode_mut(fid);
        let Content::File(d) = &mut i.content else { return err(libc::EINVAL) };
        let mut changed = false;
        for r in ranges {
            let end = r.offset + r.len;
            if !mode.keep_size && end > d.len() as u64 {
                if end > MAX_FILE {
                    return err(libc::EFBIG);
                }
                d.resize(end as usize, 0);
                changed = true;
            }
            if mode.zeroes() && r.offset < d.len() as u64 {
                let stop = end.min(d.len() as u64) as usize;
                d[r.offset as usize..stop].fill(0);
                changed = true;
            }
        }
        if changed {
            i.touch_mtime();
        }
        Ok(self.write_attr(fid))
    }
}
