//! One piece of a server-side copy (`copy_range` in the op table): the
//! gateway names the bytes to copy, and the storage servers move them from
//! one file to the other without them crossing the network (NFSv4.2's
//! COPY is the model).
//!
//! ```text
//!  copy_file_range(2) ─> FUSE ─> coherence ─> stripe: clip to the source's size,
//!                                              one request per server, each with
//!                                              the spans whose units it holds
//!                                  ─> server: copy_range(src, dst, spans) on disk
//! ```

use serde::{Deserialize, Serialize};

/// `len` bytes of the source at `src` copied to the destination at `dst`
/// (logical offsets: the same in every server's copy of a striped file).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct CopySpan {
    pub src: u64,
    pub dst: u64,
    pub len: u64,
}

/// Most bytes one `copy_range` may ask a server to copy: the count
/// answered must fit a write's, and a server's thread stays bounded
/// (stripe asks far less at a time).
pub const MAX_COPY_RANGE: u64 = 1 << 30;

impl CopySpan {
    /// EINVAL for spans a server does not copy: more than
    /// [`MAX_COPY_RANGE`] bytes in all, or an end past the largest file
    /// offset (i64::MAX, as Linux).
    pub fn check(spans: &[CopySpan]) -> Result<(), crate::FsError> {
        let end_ok = |at: u64, len: u64| at.checked_add(len).is_some_and(|e| e <= i64::MAX as u64);
        let mut total = 0u64;
        for s in spans {
            total = total.saturating_add(s.len);
            if !end_ok(s.src, s.len) || !end_ok(s.dst, s.len) {
                return Err(crate::FsError::EINVAL);
            }
        }
        match total <= MAX_COPY_RANGE {
            true => Ok(()),
            false => Err(crate::FsError::EINVAL),
        }
    }


    /// Whether copying within one file reads bytes this span writes (or
    /// writes bytes it reads): what copy_file_range(2) refuses (EINVAL).
    pub fn overlaps_itself(&self) -> bool {
        self.len > 0 && self.dst < self.src.saturating_add(self.len) && self.src < self.dst.saturating_add(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_past_the_largest_offset_or_too_long_are_refused() {
        let s = |src, dst, len| CopySpan { src, dst, len };
        assert!(CopySpan::check(&[s(0, 0, MAX_COPY_RANGE)]).is_ok());
        assert!(CopySpan::check(&[s(0, 0, MAX_COPY_RANGE), s(0, 0, 1)]).is_err());
        assert!(CopySpan::check(&[s(i64::MAX as u64, 0, 1)]).is_err());
        assert!(CopySpan::check(&[s(0, u64::MAX, 1)]).is_err());
    }

    #[test]
    fn overlap_within_one_file() {
        let s = |src, dst, len| CopySpan { src, dst, len };
        assert!(s(0, 10, 11).overlaps_itself());
        assert!(s(10, 0, 11).overlaps_itself());
        assert!(!s(0, 10, 10).overlaps_itself());
        assert!(!s(10, 0, 10).overlaps_itself());
        assert!(!s(5, 5, 0).overlaps_itself());
    }
}
