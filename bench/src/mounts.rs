//! One volume through several mounts (several gateways), so the K clients
//! of B1, B3, B4 and B5 are spread over gateways as the dissertation's
//! clients were spread over nodes: client k works through mount k mod N.
//!
//! A benchmark prepares its files through the first mount (`--dir`) and
//! hands the clients paths under it; each client's paths are rebased onto
//! its own mount at the same relative path (a file made through gateway 0
//! is stat'ed, read or shared through gateway 1 …). One mount is the
//! single-directory case: every path is left as it is.

use std::path::{Path, PathBuf};

/// The same directory through N mounts; the first is where files are prepared.
#[derive(Debug, Clone)]
pub struct Mounts {
    dirs: Vec<PathBuf>,
}

impl Mounts {
    /// `first` (the benchmark's `--dir`), then the same directory through
    /// the other mounts.
    pub fn new(first: &Path, others: &[PathBuf]) -> Mounts {
        Mounts { dirs: std::iter::once(first.to_path_buf()).chain(others.iter().cloned()).collect() }
    }

    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    /// The mount client `k` works through: k mod N, so K clients spread
    /// evenly (K = 4 over N = 2: mounts 0, 1, 0, 1).
    pub fn of_client(&self, k: usize) -> usize {
        k % self.dirs.len()
    }

    /// `path` (under the first mount) as client `k` reaches it. A path not
    /// under the first mount is left as it is.
    pub fn rebase(&self, path: &Path, k: usize) -> PathBuf {
        match path.strip_prefix(&self.dirs[0]) {
            Ok(rel) if self.dirs.len() > 1 => self.dirs[self.of_client(k)].join(rel),
            _ => path.to_path_buf(),
        }
    }

    /// Each mount must be a directory.
    pub fn check(&self) -> anyhow::Result<()> {
        for d in &self.dirs {
            anyhow::ensure!(d.is_dir(), "{} is not a directory", d.display());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_spread_over_the_mounts_round_robin() {
        let m = Mounts::new(Path::new("/m0"), &["/m1".into(), "/m2".into()]);
        let got: Vec<usize> = (0..7).map(|k| m.of_client(k)).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        let mut per = [0; 3];
        for k in 0..32 {
            per[m.of_client(k)] += 1;
        }
        assert_eq!(per, [11, 11, 10]);
    }

    #[test]
    fn paths_keep_their_place_relative_to_the_mount() {
        let m = Mounts::new(Path::new("/mnt/a"), &["/mnt/a-1".into()]);
        assert_eq!(m.rebase(Path::new("/mnt/a/imca-bench-b1/f0"), 0), Path::new("/mnt/a/imca-bench-b1/f0"));
        assert_eq!(m.rebase(Path::new("/mnt/a/imca-bench-b1/f0"), 1), Path::new("/mnt/a-1/imca-bench-b1/f0"));
        assert_eq!(m.rebase(Path::new("/mnt/a/imca-bench-b1/f0"), 3), Path::new("/mnt/a-1/imca-bench-b1/f0"));
        assert_eq!(m.rebase(Path::new("/mnt/a"), 1), Path::new("/mnt/a-1"));
        // component-wise: /mnt/a-1 is not under /mnt/a
        assert_eq!(m.rebase(Path::new("/mnt/a-1/x"), 1), Path::new("/mnt/a-1/x"));
    }

    #[test]
    fn one_mount_leaves_every_path_alone() {
        let m = Mounts::new(Path::new("/mnt/a"), &[]);
        assert_eq!(m.len(), 1);
        for k in 0..4 {
            assert_eq!(m.of_client(k), 0);
            assert_eq!(m.rebase(Path::new("/mnt/a/x"), k), Path::new("/mnt/a/x"));
        }
    }

    #[test]
    fn other_dirs_parse_and_are_optional() {
        let a = crate::parse(&["stat", "--dir", "/m0", "--other-dirs", "/m1,/m2"]).unwrap();
        let crate::Which::Stat(b) = a.which else { panic!("stat") };
        let m = b.common.mounts();
        assert_eq!(m.len(), 3);
        assert_eq!(m.rebase(Path::new("/m0/imca-bench-b1"), 2), Path::new("/m2/imca-bench-b1"));
        let a = crate::parse(&["b5", "--dir", "/m0"]).unwrap();
        let crate::Which::B5(b) = a.which else { panic!("b5") };
        assert!(b.common.other_dirs.is_empty());
        assert_eq!(b.common.mounts().len(), 1);
    }
}
