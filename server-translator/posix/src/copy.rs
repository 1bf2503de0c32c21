//! A server-side copy (`copy_range` of the op table): this server's spans
//! of a copy_file_range(2) that a gateway asked for, moved from one file of
//! the export to another (or within one) without leaving the disk's host.
//!
//! ```text
//!  stripe (gateway) ── copy_range(src, dst, [spans it holds]) ──> … ──> posix:
//!      per span: copy_file_range(2) in chunks (a reflink or an in-kernel
//!                copy on most file systems; pread/pwrite when refused),
//!                then zeros from where this copy of the source ends
//! ```
//!
//! Zeros past the end: a striped file's copy here ends at its last unit,
//! and a unit of the file that lies past that end (held by another server,
//! or a hole) reads as zeros in the volume; stripe has already clipped the
//! copy to the volume's size of the source.

use super::sys::{err, fstat, pread_uninit, pwrite_full, raw};
use super::Posix;
use std::io;
use std::os::fd::RawFd;
use xlator::*;

/// Most bytes one call moves: a bounded buffer for the pread/pwrite way.
const CHUNK: usize = 1 << 20;

impl Posix {
    /// The spans in order; the answer is a write's (posix `write`): the bytes
    /// that landed, a contiguous prefix of the spans in order (short when one
    /// failed part-way; the error only when nothing landed), the
    /// destination's attributes after, and its size and blocks before.
    pub fn copy_range(&self, src: &Loc, dst: &Loc, spans: &[CopySpan]) -> io::Result<WriteReply> {
        CopySpan::check(spans)?;
        let (from, src_fid) = self.data_fd(src)?;
        let (to, fid) = self.data_fd(dst)?;
        if src_fid == fid && spans.iter().any(CopySpan::overlaps_itself) {
            return Err(err(libc::EINVAL));
        }
        let before = fstat(raw(&to)).ok();
        let mut buf = Vec::new();
        let mut copied = 0u64;
        let mut failed = None;
        for s in spans {
            let (mut n, mut e) = copy_span(raw(&from), raw(&to), *s, &mut buf);
            // A full disk: removed files held for gateways' opens give
            // their space back, and the rest is tried again (as a write).
            if e.as_ref().is_some_and(is_full) && self.fds().release_all_holds() > 0 {
                let rest = CopySpan { src: s.src + n, dst: s.dst + n, len: s.len - n };
                let (m, again) = copy_span(raw(&from), raw(&to), rest, &mut buf);
                (n, e) = (n + m, again);
            }
            copied += n;
            if e.is_some() {
                failed = e;
                break;
            }
        }
        if let (0, Some(e)) = (copied, failed) {
            return Err(e);
        }
        let attr = match fstat(raw(&to)) {
            Ok(st) => Some(super::attr_of(&st, fid, fid != FileId::ROOT)),
            Err(e) => {
                tracing::warn!(%fid, "stat after a copy failed: {e}");
                None
            }
        };
        Ok(WriteReply {
            written: u32::try_from(copied).unwrap_or(u32::MAX),
            attr,
            size_before: before.map(|st| st.st_size as u64),
            blocks_before: before.map(|st| st.st_blocks as u64),
        })
    }
}

fn is_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Copy one span whole: the bytes that landed from its start, and the
/// error that stopped it short.
fn copy_span(from: RawFd, to: RawFd, s: CopySpan, buf: &mut Vec<u8>) -> (u64, Option<io::Error>) {
    let mut done = 0u64;
    let mut in_kernel = true;
    while done < s.len {
        let want = (s.len - done).min(CHUNK as u64) as usize;
        let (src, dst) = (s.src + done, s.dst + done);
        let r = match in_kernel {
            true => kernel_copy(from, src, to, dst, want),
            false => read_write(from, src, to, dst, want, buf),
        };
        match r {
            // this copy of the source ends here: the rest reads as zeros
            Ok(0) => {
                let (n, e) = zeros(to, dst, s.len - done, buf);
                return (done + n, e);
            }
            Ok(n) => done += n as u64,
            // file systems (or kernels) that do not copy between these two
            Err(e) if in_kernel && matches!(e.raw_os_error(), Some(libc::EXDEV | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS)) => {
                in_kernel = false
            }
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// One copy_file_range(2): bytes copied, 0 at the source's end.
fn kernel_copy(from: RawFd, src: u64, to: RawFd, dst: u64, len: usize) -> io::Result<usize> {
    let mut off_in = i64::try_from(src).map_err(|_| err(libc::EINVAL))?;
    let mut off_out = i64::try_from(dst).map_err(|_| err(libc::EFBIG))?;
    loop {
        // SAFETY: plain fds and two offsets we own; no buffer is passed.
        let r = unsafe { libc::copy_file_range(from, &mut off_in, to, &mut off_out, len, 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The same through this thread's memory: a read, then its bytes written.
fn read_write(from: RawFd, src: u64, to: RawFd, dst: u64, len: usize, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.clear();
    buf.reserve(len);
    let n = pread_uninit(from, &mut buf.spare_capacity_mut()[..len], src)?;
    // SAFETY: pread_uninit initialised the first n bytes.
    unsafe { buf.set_len(n) };
    if n == 0 {
        return Ok(0);
    }
    let m = pwrite_full(to, buf, dst)?;
    if m == 0 {
        return Err(err(libc::EIO));
    }
    Ok(m)
}

/// `len` zero bytes at `off`: what landed, and the error that stopped it.
fn zeros(to: RawFd, off: u64, len: u64, buf: &mut Vec<u8>) -> (u64, Option<io::Error>) {
    buf.clear();
    buf.resize(CHUNK.min(len as usize), 0);
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        match pwrite_full(to, &buf[..n], off + done) {
            Ok(m) => {
                done += m as u64;
                if m < n {
                    return (done, Some(err(libc::ENOSPC)));
                }
            }
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}
