//! Files being read forward past blocks the bank did not hold: the reads
//! that follow go straight to the storage servers for a while.
//!
//! A file the bank does not hold (a large file written once, whose blocks
//! are not put at its close; one evicted) is read cold in order, and every
//! read asked the bank first for blocks it could not have: a round trip
//! lost per read (the first cold read of 1 GiB ran at 0.63× of no bank).
//! After a miss, reads of the same file *forward* of it within a short
//! while skip the bank; the servers populate it as they answer, so the
//! next reader hits. Only a guess about speed: a skipped bank read is never
//! wrong, the servers being the truth. A read that goes back (a re-read
//! from the start), or comes later, asks the bank again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xlator::FileId;

/// How long after a miss forward reads skip the bank.
const FOR: Duration = Duration::from_millis(500);
/// How many reads skip it before it is asked again (a file whose later
/// part is in the bank is found again).
const READS: u32 = 64;
/// Files tracked before starting over.
const MAX_FILES: usize = 4096;

struct Cold {
    /// where the last read sent to the servers ended: a read that begins
    /// before it (a re-read, now populated) asks the bank
    past: u64,
    at: Instant,
    left: u32,
}

#[derive(Default)]
pub struct ColdReads {
    files: Mutex<HashMap<FileId, Cold>>,
}

impl ColdReads {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<FileId, Cold>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A read of `size` bytes of `fid` at `offset` missed in the bank.
    pub fn missed(&self, fid: FileId, offset: u64, size: u32) {
        let mut f = self.files();
        if f.len() >= MAX_FILES {
            f.clear();
        }
        f.insert(fid, Cold { past: offset + u64::from(size), at: Instant::now(), left: READS });
    }

    /// Whether a read of `size` bytes of `fid` at `offset` should skip the
    /// bank.
    pub fn skip(&self, fid: FileId, offset: u64, size: u32) -> bool {
        let mut f = self.files();
        let Some(c) = f.get_mut(&fid) else { return false };
        if offset < c.past || c.at.elapsed() > FOR || c.left == 0 {
            f.remove(&fid);
            return false;
        }
        c.left -= 1;
        c.past = offset + u64::from(size);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_forward_reads_soon_after_a_miss_skip_the_bank_and_only_so_many() {
        let c = ColdReads::default();
        let f = FileId(1);
        let k = 1 << 17;
        assert!(!c.skip(f, 0, k), "no miss: ask the bank");
        c.missed(f, 0, k);
        assert!(!c.skip(f, 0, k), "the missed range again (now populated): ask the bank");
        c.missed(f, 0, k);
        assert!(c.skip(f, u64::from(k), k), "forward, just after");
        assert!(!c.skip(FileId(2), u64::from(k), k), "another file");
        assert!(!c.skip(f, u64::from(k), k), "a read of what was just read asks the bank");
        assert!(!c.skip(f, 4 * u64::from(k), k), "and ends the skipping");
        c.missed(f, 0, k);
        let skipped = (1..READS + 5).filter(|i| c.skip(f, u64::from(*i) * u64::from(k), k)).count();
        assert_eq!(skipped, READS as usize, "the bank is asked again after {READS} reads");
    }
}
