//! The I/O of the latency benchmarks (B2, B3, B5), timed per operation:
//! write `records` records of `r` bytes sequentially to a fresh file; read
//! them back from the start the same way. Also the record-size sweep and
//! the sequential-slice read of B4.

use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

/// The record sizes swept: `min`, `min·factor`, … up to `max` (factor ≥ 2).
pub fn sweep(min: usize, max: usize, factor: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut r = min.max(1);
    while r <= max {
        out.push(r);
        r = r.saturating_mul(factor.max(2));
    }
    out
}

fn open(path: &Path, write: bool, direct: bool) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    if write {
        o.write(true).create(true).truncate(true);
    } else {
        o.read(true);
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Whether `dir`'s file system takes an unaligned 1-byte `O_DIRECT` write
/// (FUSE mounts do; ext4 and tmpfs refuse).
pub fn direct_works(dir: &Path) -> bool {
    let p = dir.join(".imca-bench-direct-probe");
    let ok = open(&p, true, true).and_then(|mut f| f.write_all(b"x")).is_ok();
    let _ = std::fs::remove_file(&p);
    ok
}

/// The byte record `i` of size `r` carries (so a read that returns another
/// record's bytes is caught).
fn fill(buf: &mut [u8], i: usize) {
    buf.fill(b'a' + (i % 26) as u8);
}

/// Write `records` records of `r` bytes; nanoseconds per write.
pub fn write(path: &Path, r: usize, records: usize, direct: bool) -> anyhow::Result<Vec<u64>> {
    let mut f = open(path, true, direct).map_err(|e| anyhow::anyhow!("creating {}: {e}", path.display()))?;
    let mut buf = vec![0u8; r];
    let mut ns = Vec::with_capacity(records);
    for i in 0..records {
        fill(&mut buf, i);
        let t = Instant::now();
        f.write_all(&buf).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        ns.push(t.elapsed().as_nanos() as u64);
    }
    Ok(ns)
}

/// Read `records` records of `r` bytes from the start; nanoseconds per
/// read. Every record is checked against what [`write`] wrote.
pub fn read(path: &Path, r: usize, records: usize, direct: bool) -> anyhow::Result<Vec<u64>> {
    let mut f = open(path, false, direct).map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    let (mut buf, mut want) = (vec![0u8; r], vec![0u8; r]);
    let mut ns = Vec::with_capacity(records);
    for i in 0..records {
        let t = Instant::now();
        f.read_exact(&mut buf).map_err(|e| anyhow::anyhow!("reading record {i} of {}: {e}", path.display()))?;
        ns.push(t.elapsed().as_nanos() as u64);
        fill(&mut want, i);
        anyhow::ensure!(buf == want, "{}: record {i} (size {r}) read back different bytes", path.display());
    }
    Ok(ns)
}

/// Read bytes `[from, to)` of `path` in `record`-byte preads; bytes read.
pub fn read_slice(path: &Path, from: u64, to: u64, record: usize, direct: bool) -> anyhow::Result<u64> {
    let f = open(path, false, direct).map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    let mut buf = AlignedBuf::new(record);
    let mut off = from;
    while off < to {
        let want = (to - off).min(record as u64) as usize;
        let n = f.read_at(&mut buf.as_mut()[..want], off)?;
        anyhow::ensure!(n > 0, "{}: end of file at {off}, expected {to}", path.display());
        off += n as u64;
    }
    Ok(to - from)
}

/// A page-aligned buffer, as `O_DIRECT` on a local file system wants.
struct AlignedBuf {
    v: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let v = vec![0u8; len + 4096];
        let start = v.as_ptr().align_offset(4096);
        AlignedBuf { v, start, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.start..self.start + self.len]
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the
/// machine, so client processes' start and end times can be compared.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps() {
        assert_eq!(sweep(1, 8, 2), [1, 2, 4, 8]);
        assert_eq!(sweep(1, 4096, 8), [1, 8, 64, 512, 4096]);
        assert_eq!(sweep(1, 65536, 2).len(), 17, "the dissertation's 1 B .. 64 KiB");
        assert_eq!(sweep(3, 2, 2), Vec::<usize>::new());
    }

    #[test]
    fn write_then_read_checks_every_record() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        assert_eq!(write(&p, 3, 10, false).unwrap().len(), 10);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 30);
        assert_eq!(read(&p, 3, 10, false).unwrap().len(), 10);
        // a record rewritten with other bytes is caught
        let mut v = std::fs::read(&p).unwrap();
        v[4] = b'z';
        std::fs::write(&p, v).unwrap();
        assert!(read(&p, 3, 10, false).unwrap_err().to_string().contains("record 1"));
        assert!(read(&p, 3, 11, false).is_err(), "short file");
    }

    #[test]
    fn slices_cover_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![1u8; 10_000]).unwrap();
        assert_eq!(read_slice(&p, 0, 5000, 4096, false).unwrap(), 5000);
        assert_eq!(read_slice(&p, 5000, 10_000, 4096, false).unwrap(), 5000);
        assert!(read_slice(&p, 5000, 20_000, 4096, false).is_err());
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        assert!(monotonic_ns() >= a);
    }
}
