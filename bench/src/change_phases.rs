//! The change benchmark's timed namespace phases, each a loop of ordinary
//! syscalls made by this process (one client, no child per operation, so
//! what is timed is the file system's answer and nothing else): create +
//! write 4 KiB + close, rename, unlink, mkdir, rmdir. And the directory
//! they work in, removed with everything in it when dropped, so a phase
//! that fails leaves nothing behind on the target.

use crate::progress::Progress;
use anyhow::{bail, Context};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::IntoRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What each created file gets: one page, as the table measured.
pub const FILE_BYTES: usize = 4096;

/// `DIR/imca-bench-changes`: made fresh, removed on drop.
pub struct Workdir {
    pub path: PathBuf,
}

impl Workdir {
    /// A fresh `imca-bench-changes` under `dir`; one an earlier run left
    /// (killed before it could clean up) is removed first, untimed.
    pub fn fresh(dir: &Path) -> anyhow::Result<Workdir> {
        let path = dir.join("imca-bench-changes");
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => bail!("removing what an earlier run left in {}: {e}", path.display()),
        }
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Workdir { path })
    }

    /// A new, empty subdirectory for one phase (untimed).
    pub fn sub(&self, name: &str) -> anyhow::Result<PathBuf> {
        let p = self.path.join(name);
        std::fs::create_dir(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(p)
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("imca bench changes: could not remove {}: {e}", self.path.display());
            }
        }
    }
}

/// Run `op(i)` for i in 0..n, timed as a whole; progress every quarter.
fn timed(progress: &Progress, n: usize, what: &str, mut op: impl FnMut(usize) -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let every = (n / 4).max(1);
    let t = Instant::now();
    for i in 0..n {
        op(i)?;
        if (i + 1) % every == 0 {
            progress.step(i + 1, n, what);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    progress.done();
    Ok(secs)
}

fn file(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("f{i:06}"))
}

fn renamed(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("r{i:06}"))
}

fn subdir(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("d{i:06}"))
}

/// Create `n` files in `dir` (O_CREAT|O_EXCL|O_WRONLY, 0644), write 4 KiB to
/// each and close it; a close that fails (a deferred write's error) fails
/// the phase. Seconds.
pub fn create(dir: &Path, n: usize, progress: &Progress) -> anyhow::Result<f64> {
    let mut page = [0u8; FILE_BYTES];
    timed(progress, n, "files", |i| {
        let p = file(dir, i);
        // not all zeros, so no layer can skip the data as a hole
        page.fill(b'a' + (i % 26) as u8);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&p)
            .with_context(|| format!("creating {}", p.display()))?;
        f.write_all(&page).with_context(|| format!("writing {}", p.display()))?;
        close(f.into_raw_fd()).with_context(|| format!("closing {}", p.display()))
    })
}

/// close(2), its error kept (dropping a File ignores it).
fn close(fd: i32) -> std::io::Result<()> {
    // SAFETY: `fd` was just taken from a File, so it is open and owned here.
    if unsafe { libc::close(fd) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Rename each of the `n` files of [`create`] to a new name in the same directory.
pub fn rename(dir: &Path, n: usize, progress: &Progress) -> anyhow::Result<f64> {
    timed(progress, n, "files", |i| {
        let (from, to) = (file(dir, i), renamed(dir, i));
        std::fs::rename(&from, &to).with_context(|| format!("renaming {} to {}", from.display(), to.display()))
    })
}

/// Unlink each of the `n` files [`rename`] left.
pub fn unlink(dir: &Path, n: usize, progress: &Progress) -> anyhow::Result<f64> {
    timed(progress, n, "files", |i| {
        let p = renamed(dir, i);
        std::fs::remove_file(&p).with_context(|| format!("unlinking {}", p.display()))
    })
}

/// Make `n` directories in `dir`.
pub fn mkdir(dir: &Path, n: usize, progress: &Progress) -> anyhow::Result<f64> {
    timed(progress, n, "directories", |i| {
        let p = subdir(dir, i);
        std::fs::create_dir(&p).with_context(|| format!("mkdir {}", p.display()))
    })
}

/// Remove the `n` directories of [`mkdir`].
pub fn rmdir(dir: &Path, n: usize, progress: &Progress) -> anyhow::Result<f64> {
    timed(progress, n, "directories", |i| {
        let p = subdir(dir, i);
        std::fs::remove_dir(&p).with_context(|| format!("rmdir {}", p.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_leaves_what_the_next_expects_and_the_workdir_goes() {
        let d = tempfile::tempdir().unwrap();
        let quiet = Progress::new("t", true);
        let work = Workdir::fresh(d.path()).unwrap();
        let files = work.sub("files").unwrap();
        create(&files, 5, &quiet).unwrap();
        assert_eq!(std::fs::metadata(file(&files, 4)).unwrap().len(), FILE_BYTES as u64);
        assert!(create(&files, 1, &quiet).is_err(), "O_EXCL: an existing name is an error");
        rename(&files, 5, &quiet).unwrap();
        assert!(renamed(&files, 0).exists() && !file(&files, 0).exists());
        unlink(&files, 5, &quiet).unwrap();
        assert_eq!(std::fs::read_dir(&files).unwrap().count(), 0);
        let dirs = work.sub("dirs").unwrap();
        mkdir(&dirs, 3, &quiet).unwrap();
        assert!(subdir(&dirs, 2).is_dir());
        rmdir(&dirs, 3, &quiet).unwrap();
        assert_eq!(std::fs::read_dir(&dirs).unwrap().count(), 0);
        // a failing phase: what it made still goes with the workdir
        mkdir(&dirs, 2, &quiet).unwrap();
        assert!(unlink(&files, 1, &quiet).is_err());
        drop(work);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "nothing left under DIR");
    }

    #[test]
    fn a_leftover_workdir_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("imca-bench-changes/files")).unwrap();
        std::fs::write(d.path().join("imca-bench-changes/files/f000000"), b"old").unwrap();
        let work = Workdir::fresh(d.path()).unwrap();
        assert_eq!(std::fs::read_dir(&work.path).unwrap().count(), 0);
    }
}
