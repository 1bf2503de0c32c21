//! A server-side copy in memory, as posix makes it on disk: each span read
//! from the source (zeros past its end) and written to the destination.

use crate::tree::{err, Fs};
use crate::MAX_READ;
use xlator::*;

impl Fs {
    /// posix's answer: the bytes of the spans copied in order (short when
    /// one failed after some landed), the destination's attributes after,
    /// and its size and blocks before.
    pub fn copy_range(&mut self, src: &Loc, dst: &Loc, spans: &[CopySpan]) -> FsResult<WriteReply> {
        // (posix's order: the spans, the source's kind, the destination's, the overlap)
        CopySpan::check(spans)?;
        self.read(src, 0, 0)?;
        let mut out = self.write(dst, 0, &[])?;
        if self.getattr(src)?.fid == self.getattr(dst)?.fid && spans.iter().any(CopySpan::overlaps_itself) {
            return err(libc::EINVAL);
        }
        let mut copied = 0u64;
        for s in spans {
            let mut done = 0u64;
            while done < s.len {
                let n = (s.len - done).min(u64::from(MAX_READ));
                let mut bytes = self.read(src, s.src + done, n as u32)?.to_vec();
                bytes.resize(n as usize, 0);
                match self.write(dst, s.dst + done, &bytes) {
                    Ok(w) => out.attr = w.attr,
                    Err(e) if copied + done == 0 => return Err(e),
                    Err(_) => return Ok(WriteReply { written: (copied + done) as u32, ..out }),
                }
                done += n;
            }
            copied += s.len;
        }
        out.written = u32::try_from(copied).unwrap_or(u32::MAX);
        Ok(out)
    }
}
