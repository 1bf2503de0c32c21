//! Stat-ahead: a walk that looks names up one by one in a directory the
//! gateway knows nothing about (`stat` of every file, `find`, `du`, a build
//! scanning its sources, any directory another gateway filled) costs one
//! network round trip per name. After a few such misses in one directory
//! the gateway lists it with attributes in the background (one request per
//! 256 entries, the listing READDIRPLUS uses) and remembers what it got in
//! the memo, so the rest of the walk is answered here.
//!
//! ```text
//!  LOOKUP miss in D ─> servers (as before)
//!        └─ 4th miss in D: spawn  list(D, plus) ─> memo.store_entry(…) for each name
//!  later LOOKUPs in D ─> memo (kernel_cache::memo_entry)
//! ```
//!
//! What is remembered follows the memo's rules like any other answer: the
//! tickets are taken before the first batch is asked for, so a callback or
//! a change through this gateway while the listing runs voids all of it.
//! The walk never waits for a listing; a listing that turns out useless is
//! paid for by as many misses as it listed names before the directory is
//! listed again, so a walk in a huge directory pays at most one listing
//! request per 256 misses.

use super::kernel_cache::KernelCache;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use xlator::{Loc, Next};

/// Misses in one directory that start a listing of it, by default.
pub const TRIGGER: u64 = 4;
/// Names one listing remembers at most (64 requests of 256).
const MAX_LISTED: usize = 16_384;
/// Entries asked of the pipeline per request.
const BATCH: u32 = 256;
/// Directories whose misses are counted before starting over.
const MAX_DIRS: usize = 4_096;

#[derive(Default)]
struct Dir {
    misses: u64,
    /// the miss count at which the next listing starts
    due_at: u64,
    running: bool,
}

/// Per-directory miss counts (see the module doc).
pub struct Ahead {
    /// misses that start a listing (0: none does)
    trigger: u64,
    dirs: Mutex<HashMap<u64, Dir>>,
}

impl Ahead {
    pub fn new(trigger: u64) -> Ahead {
        Ahead { trigger, dirs: Mutex::default() }
    }

    /// A LOOKUP in directory `dir` (at `loc`) went to the servers: list the
    /// directory in the background if it is due.
    pub fn missed(self: &Arc<Self>, rt: &tokio::runtime::Handle, xl: &Next, kc: &Arc<KernelCache>, dir: u64, loc: &Loc) {
        if self.trigger == 0 || !kc.memo_serving() || !self.due(dir) {
            return;
        }
        let (me, xl, kc, loc) = (self.clone(), xl.clone(), kc.clone(), loc.clone());
        rt.spawn(async move {
            let listed = list(&xl, &kc, dir, &loc).await;
            me.listed(dir, listed);
        });
    }

    /// Count a miss; true if it starts a listing.
    fn due(&self, dir: u64) -> bool {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if dirs.len() >= MAX_DIRS && !dirs.contains_key(&dir) {
            dirs.retain(|_, d| d.running);
        }
        let d = dirs.entry(dir).or_default();
        d.misses += 1;
        if d.running || d.misses < d.due_at.max(self.trigger) {
            return false;
        }
        d.running = true;
        true
    }

    /// A listing of `dir` ended having seen `listed` names.
    fn listed(&self, dir: u64, listed: usize) {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = dirs.get_mut(&dir) {
            d.running = false;
            d.due_at = d.misses + (listed as u64).max(self.trigger);
        }
    }
}

/// List `dir` with attributes and remember the entries; how many there were.
async fn list(xl: &Next, kc: &KernelCache, dir: u64, loc: &Loc) -> usize {
    let (t, m) = (kc.ticket(), kc.memo_ticket());
    let (mut cookie, mut seen) = (0u64, 0usize);
    while seen < MAX_LISTED {
        let entries = match xl.readdir(loc, cookie, BATCH, true).await {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(dir = %loc.path, "stat-ahead listing: {e:?}");
                break;
            }
        };
        let Some(last) = entries.last() else { break };
        cookie = last.next;
        seen += entries.len();
        for e in &entries {
            if let Some(a) = &e.attr {
                kc.remember_entry(t, m, dir, &e.name, a);
            }
        }
    }
    kc.count_ahead(seen);
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_listed_after_a_few_misses_then_after_as_many_as_it_held() {
        let a = Ahead::new(TRIGGER);
        let due: Vec<bool> = (0..TRIGGER).map(|_| a.due(7)).collect();
        assert_eq!(due.iter().filter(|d| **d).count(), 1);
        assert!(due[TRIGGER as usize - 1], "the {TRIGGER}th miss starts it");
        // misses while it runs start nothing more
        assert!(!a.due(7));
        a.listed(7, 1000);
        // the next listing only after 1000 more misses
        assert!((0..999).all(|_| !a.due(7)));
        assert!(a.due(7));
        // other directories count on their own
        assert!((1..TRIGGER).all(|_| !a.due(8)));
        assert!(a.due(8));
    }

    #[test]
    fn the_table_of_directories_is_bounded() {
        let a = Ahead::new(TRIGGER);
        for dir in 0..(MAX_DIRS as u64 * 3) {
            a.due(dir);
        }
        assert!(a.dirs.lock().unwrap().len() <= MAX_DIRS);
    }
}
