//! The real tree the change benchmark untars and removes: a tarball the
//! user names (`--tarball`), or one built once per run from this machine's
//! cargo registry sources — whole crates, in name order, until about
//! `--entries` entries, as `bench/scripts/untar.sh` does. Crate sources are
//! what a real untar looks like: many small files in deep directories.
//!
//! The tarball lives in a temporary directory outside the target (its
//! reads must not be part of what is measured, and removing the target's
//! tree must not remove it), made once so every target of a suite untars
//! the same tree; it is removed when the [`Tarball`] is dropped.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tarball to untar, and what is in it.
pub struct Tarball {
    pub path: PathBuf,
    /// entries `tar -tf` lists (files, directories, links)
    pub entries: usize,
    pub bytes: u64,
    /// where it came from: the named file, or the registry and crate count
    pub source: String,
    /// the temporary directory a built tarball lives in (removed on drop)
    built_in: Option<PathBuf>,
}

impl Tarball {
    /// The tarball `given`, or one built from the cargo registry with about `entries` entries.
    pub fn get(given: Option<&Path>, entries: usize) -> anyhow::Result<Tarball> {
        match given {
            Some(p) => {
                let path = std::fs::canonicalize(p).with_context(|| format!("--tarball {}", p.display()))?;
                let source = path.display().to_string();
                Tarball::described(path, source, None)
            }
            None => Tarball::build(entries),
        }
    }

    fn build(want: usize) -> anyhow::Result<Tarball> {
        let registry = registry_sources()?;
        let mut crates = Vec::new();
        for e in std::fs::read_dir(&registry).with_context(|| format!("listing {}", registry.display()))? {
            let e = e?;
            if e.file_type()?.is_dir() {
                let name = e.file_name().to_string_lossy().into_owned();
                crates.push((name, count_entries(&e.path())?));
            }
        }
        let picked = pick(crates, want);
        if picked.is_empty() {
            bail!("no crate sources in {}: name a tree with --tarball FILE", registry.display());
        }
        let dir = std::env::temp_dir().join(format!("imca-bench-tarball.{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("tree.tar");
        let out = Command::new("tar")
            .arg("-C")
            .arg(&registry)
            .arg("-cf")
            .arg(&path)
            .arg("--")
            .args(&picked)
            .output()
            .context("running tar -cf (is GNU tar installed?)")?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            bail!("tar -cf {}: {}: {}", path.display(), out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        let source = format!("{} crates of {}", picked.len(), registry.display());
        Tarball::described(path, source, Some(dir.clone())).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })
    }

    fn described(path: PathBuf, source: String, built_in: Option<PathBuf>) -> anyhow::Result<Tarball> {
        let mut t = Tarball { bytes: std::fs::metadata(&path)?.len(), path, entries: 0, source, built_in };
        let out = Command::new("tar").arg("-tf").arg(&t.path).output().context("running tar -tf")?;
        if !out.status.success() {
            bail!("tar -tf {}: {}: {}", t.path.display(), out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        t.entries = out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        if t.entries == 0 {
            bail!("{} is an empty tarball", t.path.display());
        }
        Ok(t)
    }
}

impl Drop for Tarball {
    fn drop(&mut self) {
        if let Some(d) = &self.built_in {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The first crate-source directory of the cargo registry
/// (`$CARGO_HOME/registry/src/*/`, `$CARGO_HOME` defaulting to `~/.cargo`).
fn registry_sources() -> anyhow::Result<PathBuf> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(std::env::var_os("HOME").context("no $HOME to find ~/.cargo in")?).join(".cargo"),
    };
    let src = home.join("registry/src");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&src)
        .with_context(|| format!("no cargo registry sources in {} (name a tree with --tarball FILE)", src.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter().next().with_context(|| format!("{} is empty: name a tree with --tarball FILE", src.display()))
}

/// Entries under `dir`, itself included (what tar would list for it);
/// symbolic links are entries, not followed.
fn count_entries(dir: &Path) -> anyhow::Result<usize> {
    let mut n = 1;
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e?;
        n += if e.file_type()?.is_dir() { count_entries(&e.path())? } else { 1 };
    }
    Ok(n)
}

/// Whole crates, in name order, until at least `want` entries (or all of
/// them): the tree is the same from run to run on one machine, and a crate
/// is never cut in half.
pub fn pick(mut crates: Vec<(String, usize)>, want: usize) -> Vec<String> {
    crates.sort();
    let mut n = 0;
    let mut out = Vec::new();
    for (name, entries) in crates {
        if n >= want {
            break;
        }
        n += entries;
        out.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(list: &[(&str, usize)]) -> Vec<(String, usize)> {
        list.iter().map(|(n, e)| (n.to_string(), *e)).collect()
    }

    #[test]
    fn whole_crates_in_name_order_until_enough() {
        let crates = c(&[("serde-1.0", 50), ("anyhow-1.0", 30), ("libc-0.2", 400), ("clap-4.5", 100)]);
        assert_eq!(pick(crates.clone(), 100), ["anyhow-1.0", "clap-4.5"], "30 < 100, 130 ≥ 100");
        assert_eq!(pick(crates.clone(), 130), ["anyhow-1.0", "clap-4.5"]);
        assert_eq!(pick(crates.clone(), 131), ["anyhow-1.0", "clap-4.5", "libc-0.2"]);
        assert_eq!(pick(crates.clone(), 10_000).len(), 4, "all there is");
        assert_eq!(pick(crates.clone(), 1), ["anyhow-1.0"], "at least one crate");
        assert!(pick(crates, 0).is_empty());
        assert!(pick(Vec::new(), 100).is_empty());
    }

    #[test]
    fn entries_count_the_directory_itself_and_links() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src/bin")).unwrap();
        std::fs::write(d.path().join("src/lib.rs"), b"").unwrap();
        std::fs::write(d.path().join("src/bin/main.rs"), b"").unwrap();
        std::os::unix::fs::symlink("src", d.path().join("link")).unwrap();
        // root, src, src/bin, lib.rs, main.rs, link
        assert_eq!(count_entries(d.path()).unwrap(), 6);
    }

    #[test]
    fn a_named_tarball_is_counted_and_kept() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("t")).unwrap();
        std::fs::write(d.path().join("t/a"), b"x").unwrap();
        let tar = d.path().join("t.tar");
        assert!(Command::new("tar").arg("-C").arg(d.path()).arg("-cf").arg(&tar).arg("t").status().unwrap().success());
        let t = Tarball::get(Some(&tar), 0).unwrap();
        assert_eq!(t.entries, 2);
        drop(t);
        assert!(tar.exists(), "a tarball the user named is never removed");
        assert!(Tarball::get(Some(&d.path().join("none.tar")), 0).is_err());
    }
}
