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
//!
//! Apart from paths, the table keeps every (directory, name) the kernel was
//! answered with, hard links' names too: an entry callback reaches the
//! kernel only for those. Dropping an entry takes the directory's lock in
//! the kernel, which a change through this gateway in that directory holds
//! while the servers wait for other gateways; two gateways changing one
//! directory each waited out the other's lease when every callback went to
//! the kernel.

use std::collections::HashMap;
use std::sync::Mutex;
use xlator::{FileId, FsError, FsResult, Loc};

pub const ROOT_INO: u64 = 1;

struct Node {
    loc: Loc,
    lookups: u64,
    /// The (directory inode, name) entries the kernel was answered with
    /// for this inode and may still hold.
    names: Vec<(u64, String)>,
}

/// An inode held under more names than this (hard links) stops counting
/// them: every entry callback in its directories then reaches the kernel.
const NAMES_PER_INODE: usize = 64;

pub struct Inodes {
    map: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    nodes: HashMap<u64, Node>,
    /// directory inode → name → the inode the kernel was answered with.
    entries: HashMap<u64, HashMap<String, u64>>,
    /// Directories with an inode past [`NAMES_PER_INODE`] in them.
    uncounted: std::collections::HashSet<u64>,
}

impl Table {
    fn get(&self, ino: &u64) -> Option<&Node> {
        self.nodes.get(ino)
    }

    fn get_mut(&mut self, ino: &u64) -> Option<&mut Node> {
        self.nodes.get_mut(ino)
    }

    /// The kernel was answered `dir`/`name` → `ino`.
    fn entry_added(&mut self, dir: u64, name: &str, ino: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else { return };
        if !node.names.iter().any(|(d, n)| *d == dir && n == name) {
            if node.names.len() >= NAMES_PER_INODE {
                self.uncounted.insert(dir);
                return;
            }
            node.names.push((dir, name.to_string()));
        }
        if let Some(old) = self.entries.entry(dir).or_default().insert(name.to_string(), ino) {
            if old != ino {
                self.unlink_name(old, dir, name);
            }
        }
    }

    /// The kernel no longer holds `dir`/`name`.
    fn entry_gone(&mut self, dir: u64, name: &str) -> Option<u64> {
        let names = self.entries.get_mut(&dir)?;
        let ino = names.remove(name)?;
        if names.is_empty() {
            self.entries.remove(&dir);
        }
        self.unlink_name(ino, dir, name);
        Some(ino)
    }

    fn unlink_name(&mut self, ino: u64, dir: u64, name: &str) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.names.retain(|(d, n)| !(*d == dir && n == name));
        }
    }

    fn node_gone(&mut self, ino: u64) {
        let Some(node) = self.nodes.remove(&ino) else { return };
        for (dir, name) in node.names {
            if let Some(names) = self.entries.get_mut(&dir) {
                if names.get(&name) == Some(&ino) {
                    names.remove(&name);
                }
                if names.is_empty() {
                    self.entries.remove(&dir);
                }
            }
        }
        // A kernel entry pins its directory's inode: none is left below it.
        self.entries.remove(&ino);
        self.uncounted.remove(&ino);
    }
}

impl Default for Inodes {
    fn default() -> Self {
        Self::new()
    }
}

impl Inodes {
    pub fn new() -> Inodes {
        let mut map = Table::default();
        map.nodes.insert(ROOT_INO, Node { loc: Loc::root(), lookups: 1, names: Vec::new() });
        Inodes { map: Mutex::new(map) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where inode `ino` is; ESTALE for a number this gateway never handed out
    /// (or already forgot).
    pub fn loc(&self, ino: u64) -> FsResult<Loc> {
        self.lock().get(&ino).map(|n| n.loc.clone()).ok_or(FsError::ESTALE)
    }

    /// The kernel got one more reference to `fid`, found as `name` in the
    /// directory `parent` (inode `dir`). Returns its inode number. Called
    /// before the answer's TTL is computed: a callback of the entry from
    /// then on reaches the kernel, and one before gives the answer TTL 0.
    pub fn remember(&self, dir: u64, parent: &Loc, name: &str, fid: FileId) -> u64 {
        let mut map = self.lock();
        let ino = remember_in(&mut map, &parent.path, name, fid);
        map.entry_added(dir, name, ino);
        ino
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
            map.entry_added(parent, name, ino);
            return Ok(ino);
        }
        let dir = dir.clone();
        let ino = remember_in(&mut map, &dir, name, fid);
        map.entry_added(parent, name, ino);
        Ok(ino)
    }

    /// Whether the kernel holds inode `ino` (so it may have it cached).
    pub fn knows(&self, ino: u64) -> bool {
        self.lock().nodes.contains_key(&ino)
    }

    /// Whether the kernel may hold an entry for `name` in directory `dir`:
    /// only if it was answered with it (a name it was told does not exist
    /// is not kept: ENOENT replies carry no entry timeout).
    pub fn knows_entry(&self, dir: u64, name: &str) -> bool {
        let map = self.lock();
        map.uncounted.contains(&dir) || map.entries.get(&dir).is_some_and(|names| names.contains_key(name))
    }

    /// The kernel dropped `dir`/`name` (a callback reached it, or a removal
    /// here was answered).
    pub fn entry_dropped(&self, dir: u64, name: &str) {
        self.lock().entry_gone(dir, name);
    }

    /// The kernel moved `dir`/`name` to `newdir`/`newname` (a rename here
    /// was answered), replacing what was there; with `exchange` the two
    /// swapped.
    pub fn entry_moved(&self, dir: u64, name: &str, newdir: u64, newname: &str, exchange: bool) {
        let mut map = self.lock();
        let moved = map.entry_gone(dir, name);
        let replaced = map.entry_gone(newdir, newname);
        if let Some(ino) = moved {
            map.entry_added(newdir, newname, ino);
        }
        if let (Some(ino), true) = (replaced, exchange) {
            map.entry_added(dir, name, ino);
        }
    }

    /// Every inode with the directory inode and name it was found under
    /// (`None` for the root, or when its directory is not held).
    /// (`None` for the root, or when its directory is not held); an inode
    /// under several names comes once per name.
    pub fn all_entries(&self) -> Vec<(u64, Option<u64>, String)> {
        let map = self.lock();
        let by_path: HashMap<&str, u64> = map.nodes.iter().map(|(ino, n)| (n.loc.path.as_str(), *ino)).collect();
        let mut all: Vec<(u64, Option<u64>, String)> = map
            .nodes
            .iter()
            .map(|(ino, n)| {
                let (dir, name) = match n.loc.path.rsplit_once('/') {
                    Some((d, name)) => (d, name),
                    None => ("", n.loc.path.as_str()),
                };
                let parent = if *ino == ROOT_INO { None } else { by_path.get(dir).copied() };
                (*ino, parent, name.to_string())
            })
            .collect();
        for (dir, names) in &map.entries {
            all.extend(names.iter().map(|(name, ino)| (*ino, Some(*dir), name.clone())));
        }
        all
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
                map.node_gone(ino);
                return true;
            }
        }
        false
    }

    /// `from` now lives at `to`: move it and everything below it.
    pub fn renamed(&self, from: &str, to: &str) {
        let mut map = self.lock();
        for node in map.nodes.values_mut() {
            if let Some(rest) = node.loc.path.strip_prefix(from) {
                if rest.is_empty() || rest.starts_with('/') {
                    node.loc.path = format!("{to}{rest}");
                }
            }
        }
    }
}

/// One more reference to `fid` found as `name` in the directory at `dir`.
fn remember_in(map: &mut Table, dir: &str, name: &str, fid: FileId) -> u64 {
    let ino = fid.ino();
    let path = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
    let loc = Loc { path, fid: Some(fid) };
    let node = map.nodes.entry(ino).or_insert(Node { loc: loc.clone(), lookups: 0, names: Vec::new() });
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

/// Paths strictly below `from` move below `to`.
fn move_below(map: &mut Table, from: &str, to: &str) {
    for node in map.nodes.values_mut() {
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
        self.lock().nodes.len()
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
        let ino = t.remember(ROOT_INO, &Loc::root(), "a", fid);
        assert_eq!(ino, fid.ino());
        t.remember(ROOT_INO, &Loc::root(), "a", fid);
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
        let d = t.remember(ROOT_INO, &Loc::root(), "d", FileId::from_random(1));
        let f = t.remember(d, &Loc::new("d", None), "f", FileId::from_random(2));
        let other = t.remember(ROOT_INO, &Loc::root(), "dd", FileId::from_random(3));
        t.renamed("d", "x/y");
        assert_eq!(t.loc(d).unwrap().path, "x/y");
        assert_eq!(t.loc(f).unwrap().path, "x/y/f");
        assert_eq!(t.loc(other).unwrap().path, "dd");
        t.exchanged("x/y", "dd");
        // Found under a new name (renamed by another gateway): what is
        // below it moves along.
        t.remember(ROOT_INO, &Loc::root(), "z", FileId::from_random(1));
        assert_eq!(t.loc(d).unwrap().path, "z");
        assert_eq!(t.loc(f).unwrap().path, "z/f");
        assert_eq!(t.loc(other).unwrap().path, "x/y");
        t.exchanged("z", "dd");
        assert_eq!(t.loc(d).unwrap().path, "dd");
        assert_eq!(t.loc(f).unwrap().path, "dd/f");
        assert_eq!(t.loc(other).unwrap().path, "x/y");
    }

    #[test]
    fn the_kernel_holds_the_entries_it_was_answered_with() {
        let t = Inodes::new();
        let (dfid, ffid) = (FileId::from_random(1), FileId::from_random(2));
        let d = t.remember(ROOT_INO, &Loc::root(), "d", dfid);
        assert!(t.knows_entry(ROOT_INO, "d") && !t.knows_entry(ROOT_INO, "e"));
        assert!(!t.knows_entry(d, "f"), "never answered");
        let f = t.remember_under(d, "f", ffid).unwrap();
        // a hard link's second name, answered too: both are held
        t.remember_under(d, "link", ffid).unwrap();
        assert!(t.knows_entry(d, "f") && t.knows_entry(d, "link"));
        t.entry_moved(d, "f", d, "g", false);
        assert!(!t.knows_entry(d, "f") && t.knows_entry(d, "g") && t.knows_entry(d, "link"));
        t.entry_dropped(d, "link");
        assert!(!t.knows_entry(d, "link") && t.knows_entry(d, "g"));
        // exchanged: both names stay held, each naming the other inode
        let h = t.remember_under(d, "h", FileId::from_random(3)).unwrap();
        t.entry_moved(d, "g", d, "h", true);
        assert!(t.knows_entry(d, "g") && t.knows_entry(d, "h"));
        t.forget(f, 3);
        assert!(!t.knows_entry(d, "h"), "f (now at h) forgotten");
        assert!(t.knows_entry(d, "g"), "h's inode (now at g) still held");
        t.forget(h, 1);
        t.forget(d, 1);
        assert!(!t.knows_entry(ROOT_INO, "d") && !t.knows_entry(d, "g"));
        assert!(t.lock().entries.is_empty(), "{:?}", t.lock().entries);
    }
}
