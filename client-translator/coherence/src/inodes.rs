//! The inode table: FUSE inode number → where the file is.
//!
//! An inode number is the file id's [`FileId::ino`], so every gateway gives a
//! file the same number. The table remembers, per inode, the path it was last
//! looked up under (namespace operations need a path) and the full file id
//! (data operations resolve by id, which survives renames done elsewhere).
//! A directory renamed by another gateway is found again under its new name
//! (the kernel's entry for the old one is called back); everything below it
//! moves along, since the kernel may hold those entries without looking
//! them up again. Entries live while the kernel holds lookups on
//! them (`forget` ends them); the root lives forever.

use std::collections::HashMap;
use std::sync::Mutex;
use xlator::{FileId, FsError, FsResult, Loc};

pub const ROOT_INO: u64 = 1;

struct Node {
    loc: Loc,
    lookups: u64,
}

pub struct Inodes {
    map: Mutex<HashMap<u64, Node>>,
}

impl Default for Inodes {
    fn default() -> Self {
        Self::new()
    }
}

impl Inodes {
    pub fn new() -> Inodes {
        let mut map = HashMap::new();
        map.insert(ROOT_INO, Node { loc: Loc::root(), lookups: 1 });
        Inodes { map: Mutex::new(map) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Node>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where inode `ino` is; ESTALE for a number this gateway never handed out
    /// (or already forgot).
    pub fn loc(&self, ino: u64) -> FsResult<Loc> {
        self.lock().get(&ino).map(|n| n.loc.clone()).ok_or(FsError::ESTALE)
    }

    /// The kernel got one more reference to `fid`, found as `name` in the
    /// directory at `parent_path`. Returns its inode number.
    pub fn remember(&self, parent: &Loc, name: &str, fid: FileId) -> u64 {
        let mut map = self.lock();
        remember_in(&mut map, &parent.path, name, fid)
    }

    /// [`Inodes::remember`] for a name in the directory with inode `parent`
    /// (ESTALE if the kernel no longer holds it): the memo's answer to a
    /// LOOKUP, which allocates nothing when the name is known already.
    pub fn remember_under(&self, parent: u64, name: &str, fid: FileId) -> FsResult<u64> {
        let ino = fid.ino();
        let mut map = self.lock();
        let dir = &map.get(&parent).ok_or(FsError::ESTALE)?.loc.path;
        if map.get(&ino).is_some_and(|n| n.loc.fid == Some(fid) && is_child(&n.loc.path, dir, name)) {
            if let Some(n) = map.get_mut(&ino) {
                n.lookups += 1;
            }
            return Ok(ino);
        }
        let dir = dir.clone();
        Ok(remember_in(&mut map, &dir, name, fid))
    }

    /// Whether the kernel holds inode `ino` (so it may have it cached).
    pub fn knows(&self, ino: u64) -> bool {
        self.lock().contains_key(&ino)
    }

    /// Every inode with the directory inode and name it was found under
    /// (`None` for the root, or when its directory is not held).
    pub fn all_entries(&self) -> Vec<(u64, Option<u64>, String)> {
        let map = self.lock();
        let by_path: HashMap<&str, u64> = map.iter().map(|(ino, n)| (n.loc.path.as_str(), *ino)).collect();
        map.iter()
            .map(|(ino, n)| {
                let (dir, name) = match n.loc.path.rsplit_once('/') {
                    Some((d, name)) => (d, name),
                    None => ("", n.loc.path.as_str()),
                };
                let parent = if *ino == ROOT_INO { None } else { by_path.get(dir).copied() };
                (*ino, parent, name.to_string())
            })
            .collect()
    }

    /// The kernel dropped `n` references; true if it holds none now.
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        if ino == ROOT_INO {
            return false;
        }
        let mut map = self.lock();
        if let Some(node) = map.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.lookups == 0 {
                map.remove(&ino);
                return true;
            }
        }
        false
    }

    /// `from` now lives at `to`: move it and everything below it.
    pub fn renamed(&self, from: &str, to: &str) {
        let mut map = self.lock();
        for node in map.values_mut() {
            if let Some(rest) = node.loc.path.strip_prefix(from) {
                if rest.is_empty() || rest.starts_with('/') {
                    node.loc.path = format!("{to}{rest}");
                }
            }
        }
    }
}

/// Paths strictly below `from` move below `to`.
fn remember_in(map: &mut HashMap<u64, Node>, dir: &str, name: &str, fid: FileId) -> u64 {
    let ino = fid.ino();
    let path = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
    let loc = Loc { path, fid: Some(fid) };
    let node = map.entry(ino).or_insert(Node { loc: loc.clone(), lookups: 0 });
    if node.loc.fid != Some(fid) && ino != ROOT_INO {
        tracing::warn!(ino, old = ?node.loc.fid, new = %fid, "inode number reused by another file id");
    }
    node.lookups += 1;
    if ino != ROOT_INO && node.loc.path != loc.path {
        // Renamed elsewhere (found under a new name): what the kernel
        // holds below it moved too, and may not be looked up again
        // while its entries are cached.
        let old = std::mem::replace(&mut node.loc, loc.clone());
        if !old.path.is_empty() {
            move_below(map, &old.path, &loc.path);
        }
    } else if ino != ROOT_INO {
        node.loc = loc;
    }
    ino
}

/// Whether `path` is `name` in the directory at `dir` (`Loc::child`'s form).
fn is_child(path: &str, dir: &str, name: &str) -> bool {
    if dir.is_empty() {
        return path == name;
    }
    path.len() == dir.len() + 1 + name.len()
        && path.starts_with(dir)
        && path.as_bytes()[dir.len()] == b'/'
        && path.ends_with(name)
}

fn move_below(map: &mut HashMap<u64, Node>, from: &str, to: &str) {
    for node in map.values_mut() {
        if let Some(rest) = node.loc.path.strip_prefix(from) {
            if rest.starts_with('/') {
                node.loc.path = format!("{to}{rest}");
            }
        }
    }
}

impl Inodes {

    /// `a` and `b` swapped places (RENAME_EXCHANGE).
    pub fn exchanged(&self, a: &str, b: &str) {
        let tmp = "\0exchange";
        self.renamed(a, tmp);
        self.renamed(b, a);
        self.renamed(tmp, b);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_forget_lifecycle() {
        let t = Inodes::new();
        let fid = FileId::from_random(42);
        let ino = t.remember(&Loc::root(), "a", fid);
        assert_eq!(ino, fid.ino());
        t.remember(&Loc::root(), "a", fid);
        assert_eq!(t.loc(ino).unwrap(), Loc::new("a", Some(fid)));
        t.forget(ino, 1);
        assert!(t.loc(ino).is_ok());
        t.forget(ino, 1);
        assert_eq!(t.loc(ino), Err(FsError::ESTALE));
        t.forget(ROOT_INO, 100);
        assert_eq!(t.loc(ROOT_INO).unwrap(), Loc::root());
    }

    #[test]
    fn remembered_under_a_directory_inode() {
        let t = Inodes::new();
        let (dfid, ffid) = (FileId::from_random(1), FileId::from_random(2));
        let d = t.remember_under(ROOT_INO, "d", dfid).unwrap();
        let f = t.remember_under(d, "f", ffid).unwrap();
        assert_eq!(t.remember_under(d, "f", ffid), Ok(f));
        assert_eq!(t.loc(f).unwrap(), Loc::new("d/f", Some(ffid)));
        // two lookups: one forget keeps it
        t.forget(f, 1);
        assert!(t.loc(f).is_ok());
        // found under another name (renamed elsewhere): it moves
        t.remember_under(ROOT_INO, "g", ffid).unwrap();
        assert_eq!(t.loc(f).unwrap().path, "g");
        // the same name in another directory is another place
        t.remember_under(d, "g", ffid).unwrap();
        assert_eq!(t.loc(f).unwrap().path, "d/g");
        assert_eq!(t.remember_under(999, "x", ffid), Err(FsError::ESTALE));
    }

    #[test]
    fn rename_moves_descendants_only() {
        let t = Inodes::new();
        let d = t.remember(&Loc::root(), "d", FileId::from_random(1));
        let f = t.remember(&Loc::new("d", None), "f", FileId::from_random(2));
        let other = t.remember(&Loc::root(), "dd", FileId::from_random(3));
        t.renamed("d", "x/y");
        assert_eq!(t.loc(d).unwrap().path, "x/y");
        assert_eq!(t.loc(f).unwrap().path, "x/y/f");
        assert_eq!(t.loc(other).unwrap().path, "dd");
        t.exchanged("x/y", "dd");
        // Found under a new name (renamed by another gateway): what is
        // below it moves along.
        t.remember(&Loc::root(), "z", FileId::from_random(1));
        assert_eq!(t.loc(d).unwrap().path, "z");
        assert_eq!(t.loc(f).unwrap().path, "z/f");
        assert_eq!(t.loc(other).unwrap().path, "x/y");
        t.exchanged("z", "dd");
        assert_eq!(t.loc(d).unwrap().path, "dd");
        assert_eq!(t.loc(f).unwrap().path, "dd/f");
        assert_eq!(t.loc(other).unwrap().path, "x/y");
    }
}
