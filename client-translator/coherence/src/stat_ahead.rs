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
//!        └─ 4th miss in D: spawn  list(D, plus) ─> memo.store_entry(…) for each name, batch by batch
//!  LOOKUP miss in D while it is listed: wait (≤ WAIT) for batches, look in the memo again, else servers
//!  later LOOKUPs in D ─> memo (KernelCache::memo_entry)
//! ```
//!
//! What is remembered follows the memo's rules like any other answer: the
//! tickets are taken before the first batch is asked for, so a callback or
//! a change through this gateway while the listing runs voids the rest of
//! it (and ends it). A lookup meanwhile waits for the listing's batches a
//! little ([`WAIT`]) rather than adding its own round trip to the one under
//! way. A listing that turns out useless is paid for by as many misses as
//! it listed names before the directory is listed again, so a walk in a
//! huge directory pays at most one listing request per 256 misses.

use crate::kernel_cache::KernelCache;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use xlator::{Attr, Loc, Next};

/// Misses in one directory that start a listing of it, by default.
pub const TRIGGER: u64 = 4;
/// Names one listing remembers at most (256 requests of 256).
const MAX_LISTED: usize = 65_536;
/// Entries asked of the pipeline per request.
const BATCH: u32 = 256;
/// Directories whose misses are counted before starting over.
const MAX_DIRS: usize = 4_096;
/// How long a lookup waits for a listing under way before asking the
/// servers itself (a listing request is about one lookup's round trip).
pub const WAIT: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Dir {
    misses: u64,
    /// the miss count at which the next listing starts
    due_at: u64,
    /// the listing under way: batches remembered so far (closed when it ends)
    running: Option<watch::Receiver<u32>>,
}

/// A listing under way that a lookup may wait for.
pub struct Listing(watch::Receiver<u32>);

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

    /// A LOOKUP in directory `dir` (at `loc`) was not answered from the
    /// memo: list the directory in the background if it is due. Returns the
    /// listing under way, if any, for the lookup to wait on.
    /// (Called inside the runtime: the listing is spawned on it.)
    pub fn missed(self: &Arc<Self>, xl: &Next, kc: &Arc<KernelCache>, dir: u64, loc: &Loc) -> Option<Listing> {
        if self.trigger == 0 || !kc.memo_serving() {
            return None;
        }
        let (rx, progress) = self.due(dir)?;
        if let Some(progress) = progress {
            let (me, xl, kc, loc) = (self.clone(), xl.clone(), kc.clone(), loc.clone());
            tokio::spawn(async move {
                let listed = list(&xl, &kc, dir, &loc, progress).await;
                me.listed(dir, listed);
            });
        }
        Some(Listing(rx))
    }

    /// Count a miss: the listing under way (and, when this miss starts it,
    /// where it tells its progress).
    fn due(&self, dir: u64) -> Option<(watch::Receiver<u32>, Option<watch::Sender<u32>>)> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if dirs.len() >= MAX_DIRS && !dirs.contains_key(&dir) {
            dirs.retain(|_, d| d.running.is_some());
        }
        let d = dirs.entry(dir).or_default();
        d.misses += 1;
        if let Some(rx) = &d.running {
            return Some((rx.clone(), None));
        }
        if d.misses < d.due_at.max(self.trigger) {
            return None;
        }
        let (tx, rx) = watch::channel(0);
        d.running = Some(rx.clone());
        Some((rx, Some(tx)))
    }

    /// A listing of `dir` ended having seen `listed` names.
    fn listed(&self, dir: u64, listed: usize) {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = dirs.get_mut(&dir) {
            d.running = None;
            d.due_at = d.misses + (listed as u64).max(self.trigger);
        }
    }
}

impl Listing {
    /// Wait (at most [`WAIT`]) until the listing remembered `name` in
    /// `dir`: its attributes, or None (not listed yet, not there, or the
    /// listing was voided or ended).
    pub async fn wait_for(mut self, kc: &KernelCache, dir: u64, name: &str) -> Option<Attr> {
        let found = async {
            loop {
                // (remembered but not yet held: waits for the hold)
                if let Some((a, _)) = kc.memo_entry_soon(dir, name).await {
                    return Some(a);
                }
                // Err: the listing ended (one last look)
                if self.0.changed().await.is_err() {
                    return kc.memo_entry_soon(dir, name).await.map(|(a, _)| a);
                }
            }
        };
        tokio::time::timeout(WAIT, found).await.ok().flatten()
    }
}

/// List `dir` with attributes and remember the entries, telling `progress`
/// after each batch; how many there were. Ends early once nothing more
/// would be remembered (a callback or a change here moved the epochs).
async fn list(xl: &Next, kc: &KernelCache, dir: u64, loc: &Loc, progress: watch::Sender<u32>) -> usize {
    let (t, m) = (kc.ticket(), kc.memo_ticket());
    let (mut cookie, mut seen) = (0u64, 0usize);
    'batches: while seen < MAX_LISTED {
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
                if !kc.remember_entry(t, m, dir, &e.name, a) {
                    break 'batches;
                }
            }
        }
        progress.send_modify(|n| *n += 1);
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
        let starts = |a: &Ahead, dir| matches!(a.due(dir), Some((_, Some(_))));
        let due: Vec<bool> = (0..TRIGGER).map(|_| starts(&a, 7)).collect();
        assert_eq!(due.iter().filter(|d| **d).count(), 1);
        assert!(due[TRIGGER as usize - 1], "the {TRIGGER}th miss starts it");
        // misses while it runs start nothing more, and may wait on it
        assert!(matches!(a.due(7), Some((_, None))));
        a.listed(7, 1000);
        // the next listing only after 1000 more misses
        assert!((0..999).all(|_| a.due(7).is_none()));
        assert!(starts(&a, 7));
        // other directories count on their own
        assert!((1..TRIGGER).all(|_| a.due(8).is_none()));
        assert!(starts(&a, 8));
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
