//! A directory's entries. Each name gets a cookie when it is inserted (a
//! counter, like tmpfs's), and a listing continues "after cookie c", so a
//! listing resumed after other names came and went neither repeats nor
//! skips the names that stayed.

use std::collections::BTreeMap;
use xlator::FileId;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub fid: FileId,
    pub cookie: u64,
    pub is_dir: bool,
}

#[derive(Default, Debug)]
pub(crate) struct Dir {
    names: BTreeMap<String, Entry>,
    /// cookie -> name: the listing order
    order: BTreeMap<u64, String>,
    last_cookie: u64,
    /// subdirectories, for the directory's nlink (2 + subdirectories)
    subdirs: u32,
}

impl Dir {
    pub fn get(&self, name: &str) -> Option<Entry> {
        self.names.get(name).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn subdirs(&self) -> u32 {
        self.subdirs
    }

    /// Add `name` (which must be absent) at the end of the listing.
    pub fn insert(&mut self, name: &str, fid: FileId, is_dir: bool) {
        debug_assert!(!self.names.contains_key(name));
        self.last_cookie += 1;
        let cookie = self.last_cookie;
        self.names.insert(name.to_string(), Entry { fid, cookie, is_dir });
        self.order.insert(cookie, name.to_string());
        self.subdirs += is_dir as u32;
    }

    pub fn remove(&mut self, name: &str) -> Option<Entry> {
        let e = self.names.remove(name)?;
        self.order.remove(&e.cookie);
        self.subdirs -= e.is_dir as u32;
        Some(e)
    }

    /// Point an existing name at another object, keeping its place in the
    /// listing (rename's exchange).
    pub fn repoint(&mut self, name: &str, fid: FileId, is_dir: bool) {
        let e = self.names.get_mut(name).expect("repoint an existing name");
        self.subdirs = self.subdirs - e.is_dir as u32 + is_dir as u32;
        e.fid = fid;
        e.is_dir = is_dir;
    }

    /// Entries after `cookie`, in listing order: (name, entry).
    pub fn after(&self, cookie: u64) -> impl Iterator<Item = (&str, Entry)> + '_ {
        self.order.range(cookie.saturating_add(1)..).map(|(_, n)| (n.as_str(), self.names[n]))
    }
}
