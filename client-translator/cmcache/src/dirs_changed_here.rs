//! Directories this gateway is changing skip the bank for their own stat.
//!
//! Every create, removal or rename in a directory changes its mtime, so the
//! storage server deletes the directory's stat from the bank before it
//! acknowledges. The kernel then asks for the directory's attributes again
//! (its cached ones were dropped with the change), and a bank lookup would
//! only find the key gone: a claim round trip and a `cas` for a value the
//! next change deletes again. An untar pays that once per file
//! (docs/benchmarks/archive/issue-11-untar-locks-dir-ids.md, "Untar and `rm -rf`"). So the first stat of a
//! directory after a change through this gateway (within [`RECENT`]) is
//! asked of the storage servers directly, with nothing populated; the next
//! one, if no change came between, claims and populates as usual, so a
//! directory that stops changing is soon answered by the bank again.
//!
//! Only a shortcut: going to the storage servers is always correct, so a
//! directory forgotten here (the table is bounded) just costs the bank
//! round trip again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xlator::FileId;

/// How long after a change a directory's stat skips the bank.
pub const RECENT: Duration = Duration::from_secs(1);
/// Directories remembered at most (the table is cleared when full).
const MAX_DIRS: usize = 4096;

#[derive(Default)]
pub struct DirsChangedHere {
    dirs: Mutex<HashMap<FileId, Instant>>,
}

impl DirsChangedHere {
    /// A name in `dir` is being added, removed or renamed through here.
    pub fn touched(&self, dir: Option<FileId>) {
        let Some(dir) = dir else { return };
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if dirs.len() >= MAX_DIRS && !dirs.contains_key(&dir) {
            let now = Instant::now();
            dirs.retain(|_, t| now.duration_since(*t) < RECENT);
            if dirs.len() >= MAX_DIRS {
                dirs.clear();
            }
        }
        dirs.insert(dir, Instant::now());
    }

    /// Whether `fid` is a directory changed through here within [`RECENT`]
    /// and not asked for since: true once per change.
    pub fn take(&self, fid: FileId) -> bool {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        dirs.remove(&fid).is_some_and(|t| t.elapsed() < RECENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touched_directory_is_taken_once_per_change_and_others_never() {
        let c = DirsChangedHere::default();
        let (a, b) = (FileId(10), FileId(11));
        c.touched(Some(a));
        c.touched(None);
        assert!(c.take(a));
        assert!(!c.take(a), "once per change");
        assert!(!c.take(b));
        c.touched(Some(a));
        assert!(c.take(a));
    }

    #[test]
    fn the_table_stays_bounded() {
        let c = DirsChangedHere::default();
        for i in 0..(3 * MAX_DIRS as u64) {
            c.touched(Some(FileId(u128::from(i))));
        }
        assert!(c.dirs.lock().unwrap().len() <= MAX_DIRS);
        assert!(c.take(FileId(3 * MAX_DIRS as u128 - 1)), "the latest is kept");
    }
}
