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

impl CopySpan {
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
    fn overlap_within_one_file() {
        let s = |src, dst, len| CopySpan { src, dst, len };
        assert!(s(0, 10, 11).overlaps_itself());
        assert!(s(10, 0, 11).overlaps_itself());
        assert!(!s(0, 10, 10).overlaps_itself());
        assert!(!s(10, 0, 10).overlaps_itself());
        assert!(!s(5, 5, 0).overlaps_itself());
    }
}
