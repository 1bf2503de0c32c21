//! The memo's names, by directory, each directory with when it was last
//! used, so that at the memo's bound the directories used longest ago are
//! the ones forgotten (see `memo`).

use std::collections::HashMap;

/// One directory's remembered names.
#[derive(Default)]
struct Dir {
    names: HashMap<Box<str>, u64>,
    /// the memo's clock when a name of it was last stored or asked for
    used: u64,
}

/// Names by directory: a lookup borrows the name it is asked for (one
/// map keyed by (directory, owned name) costs an allocation per lookup).
#[derive(Default)]
pub struct MemoNames {
    dirs: HashMap<u64, Dir>,
    len: usize,
}

impl MemoNames {
    /// The inode `name` in `parent` names, if remembered; the directory
    /// counts as used at `now` either way (asking for a name it lacks is a
    /// use too: see `Memo::absent`).
    pub fn get(&mut self, parent: u64, name: &str, now: u64) -> Option<u64> {
        let dir = self.dirs.get_mut(&parent)?;
        dir.used = now;
        dir.names.get(name).copied()
    }

    pub fn insert(&mut self, parent: u64, name: &str, ino: u64, now: u64) {
        let dir = self.dirs.entry(parent).or_default();
        dir.used = now;
        if dir.names.insert(name.into(), ino).is_none() {
            self.len += 1;
        }
    }

    pub fn remove(&mut self, parent: u64, name: &str) -> Option<u64> {
        let dir = self.dirs.get_mut(&parent)?;
        let ino = dir.names.remove(name)?;
        if dir.names.is_empty() {
            self.dirs.remove(&parent);
        }
        self.len -= 1;
        Some(ino)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Forget whole directories' names, those used longest ago first,
    /// until at most `target` are left; returns the directories forgotten.
    pub fn shed(&mut self, target: usize) -> Vec<u64> {
        let mut by_use: Vec<(u64, u64)> = self.dirs.iter().map(|(ino, d)| (d.used, *ino)).collect();
        by_use.sort_unstable();
        let mut gone = Vec::new();
        for (_, ino) in by_use {
            if self.len <= target {
                break;
            }
            if let Some(d) = self.dirs.remove(&ino) {
                self.len -= d.names.len();
                gone.push(ino);
            }
        }
        gone
    }

    pub fn clear(&mut self) {
        self.dirs.clear();
        self.len = 0;
    }
}
