//! The arguments of a `fallocate`: what it does ([`FallocMode`]) and the
//! byte ranges it does it to ([`Extent`]).
//!
//! ```text
//!  fallocate(fd, mode, offset, len)        one range, Linux's flags
//!    FUSE bridge: FallocMode::from_linux   the modes FUSE passes; others EOPNOTSUPP
//!    stripe: each server its own extents   [offset, offset+len) cut by stripe unit
//!    posix: fallocate(2) per extent        on that server's (sparse) copy
//! ```
//!
//! A server is sent only the extents it owns, so no server allocates space
//! for another's stripes (the copies' blocks add up to the file's, as for
//! a write) and no server zeroes bytes it does not hold.

/// What a fallocate does to its extents: the modes the FUSE kernel passes
/// on (it answers EOPNOTSUPP itself for collapse, insert and unshare).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum FallocOp {
    /// allocate space; the bytes stay as they were (mode 0)
    Allocate,
    /// free the space; the bytes read as zeros (always with `keep_size`)
    PunchHole,
    /// the bytes read as zeros, space allocated
    ZeroRange,
}

/// A fallocate mode: the operation and whether the file's size stays
/// (`FALLOC_FL_KEEP_SIZE`); without it a range past the end extends the
/// file to the range's end.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FallocMode {
    pub op: FallocOp,
    pub keep_size: bool,
}

impl FallocMode {
    /// Linux's `mode` argument, if it is one of the supported modes:
    /// allocate or zero range, each with or without keep-size, and punch
    /// hole with keep-size (Linux's rule: punching never changes the size).
    /// Anything else is EOPNOTSUPP, as a local file system that lacks the
    /// mode answers.
    pub fn from_linux(mode: i32) -> Option<FallocMode> {
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let op = match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => FallocOp::Allocate,
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => FallocOp::PunchHole,
            libc::FALLOC_FL_ZERO_RANGE => FallocOp::ZeroRange,
            _ => return None,
        };
        Some(FallocMode { op, keep_size })
    }

    /// The `mode` argument of fallocate(2) for this mode.
    pub fn to_linux(self) -> i32 {
        let op = match self.op {
            FallocOp::Allocate => 0,
            FallocOp::PunchHole => libc::FALLOC_FL_PUNCH_HOLE,
            FallocOp::ZeroRange => libc::FALLOC_FL_ZERO_RANGE,
        };
        op | if self.keep_size { libc::FALLOC_FL_KEEP_SIZE } else { 0 }
    }

    /// Whether the bytes of the extents change (they read as zeros after):
    /// what caches of the file's data must drop. An allocation changes
    /// only the space and, without keep-size, the size.
    pub fn zeroes(self) -> bool {
        matches!(self.op, FallocOp::PunchHole | FallocOp::ZeroRange)
    }
}

/// `len` bytes at `offset` of a file.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

impl Extent {
    /// One past the last byte; None if that is past what a file offset
    /// can be (Linux's `loff_t`: EFBIG there).
    pub fn end(self) -> Option<u64> {
        self.offset.checked_add(self.len).filter(|&e| e <= i64::MAX as u64)
    }
}

/// Extents one fallocate request may carry (a server's share of a range
/// over more stripe units goes in several requests).
pub const MAX_EXTENTS: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_fuse_passes_round_trip_and_the_rest_are_refused() {
        use libc::{FALLOC_FL_KEEP_SIZE as K, FALLOC_FL_PUNCH_HOLE as P, FALLOC_FL_ZERO_RANGE as Z};
        for m in [0, K, P | K, Z, Z | K] {
            assert_eq!(FallocMode::from_linux(m).map(FallocMode::to_linux), Some(m));
        }
        for m in [P, P | Z, P | Z | K, libc::FALLOC_FL_COLLAPSE_RANGE, libc::FALLOC_FL_INSERT_RANGE, 0x40, 0x100] {
            assert_eq!(FallocMode::from_linux(m), None, "{m:#x}");
        }
        assert!(FallocMode::from_linux(P | K).unwrap().zeroes());
        assert!(!FallocMode::from_linux(K).unwrap().zeroes());
    }

    #[test]
    fn an_extent_past_the_largest_offset_has_no_end() {
        assert_eq!(Extent { offset: 5, len: 7 }.end(), Some(12));
        assert_eq!(Extent { offset: i64::MAX as u64, len: 1 }.end(), None);
        assert_eq!(Extent { offset: u64::MAX, len: 1 }.end(), None);
    }
}
