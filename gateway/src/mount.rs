//! The mount point: checking it, cleaning a stale one, mounting, unmounting.

use crate::fuse::readers::Readers;
use crate::fuse::GatewayFs;
use anyhow::{bail, Context};
use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// True when `path` is the mount point of a FUSE mount whose daemon is gone
/// ("Transport endpoint is not connected", or "Software caused connection
/// abort" while the kernel is still tearing the connection down).
pub fn is_stale(path: &Path) -> bool {
    matches!(std::fs::metadata(path), Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)))
}

/// Detach a mount at `path` (lazily, so a shell still sitting in it does not
/// block us); falls back to `fusermount3 -u -z` when not root.
pub fn unmount_lazy(path: &Path) -> anyhow::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    let out = std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(path).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => bail!("cannot unmount {}: {err}; fusermount3: {}", path.display(), String::from_utf8_lossy(&o.stderr).trim()),
        Err(e) => bail!("cannot unmount {}: {err}; fusermount3: {e}", path.display()),
    }
}

/// Is `path` (canonical) listed as a mount point in /proc/self/mountinfo?
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    info.lines().filter_map(|l| l.split(' ').nth(4)).any(|mp| Path::new(&unescape(mp)) == path)
}

/// The mount holding `path` (canonical): its mount point, file system type
/// and source, from /proc/self/mountinfo (the longest mount point that is a
/// prefix of `path`). An IMCa mount is `fuse.imca` (or `fuse` from source
/// `imca` when mounted without the subtype).
pub fn mount_of(path: &Path) -> Option<(PathBuf, String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            Some((PathBuf::from(unescape(fields.get(4)?)), fields.get(sep + 1)?.to_string(), fields.get(sep + 2)?.to_string()))
        })
        .filter(|(p, _, _)| path.starts_with(p))
        .max_by_key(|(p, _, _)| p.as_os_str().len())
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Make `path` ready to mount on: clean a stale mount left by a crashed
/// gateway, refuse a missing path, a non-directory or a live mount.
pub fn prepare(path: &Path) -> anyhow::Result<PathBuf> {
    if is_stale(path) {
        tracing::warn!(path = %path.display(), "cleaning a stale mount (transport endpoint is not connected)");
        unmount_lazy(path).context("cleaning a stale mount")?;
    }
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("mount point {} does not exist", path.display()),
        Err(e) => bail!("mount point {}: {e}", path.display()),
    };
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", path.display());
    }
    let canon = path.canonicalize().with_context(|| format!("mount point {}", path.display()))?;
    if is_mount_point(&canon) {
        bail!(
            "mount point {} is busy: something is already mounted there (another gateway?); unmount it first (fusermount3 -u {})",
            canon.display(),
            canon.display()
        );
    }
    Ok(canon)
}

/// A live mount; unmounts when told to (or dropped).
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
    readers: Arc<Readers>,
    path: PathBuf,
}

impl Mounted {
    /// Mount `fs` at `path` with `threads` FUSE reader threads. Returns once
    /// the kernel has completed the FUSE handshake: the mount is live.
    pub fn mount(fs: GatewayFs, path: &Path, threads: usize) -> anyhow::Result<Mounted> {
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![
            fuser::MountOption::FSName("imca".into()),
            fuser::MountOption::Subtype("imca".into()),
            fuser::MountOption::DefaultPermissions,
        ];
        // Everyone may use the mount; the kernel checks permissions (default_permissions).
        cfg.acl = fuser::SessionACL::All;
        cfg.n_threads = Some(threads.max(1));
        cfg.clone_fd = true;
        let readers = Arc::new(Readers::new(threads));
        let fs = fs.with_readers(readers.clone());
        let session = fuser::Session::new(fs, path, &cfg).with_context(|| format!("mounting FUSE at {}", path.display()))?;
        readers.watch(session.as_fd().try_clone_to_owned().context("duplicating the FUSE device")?);
        let session = session.spawn().context("starting FUSE threads")?;
        Ok(Mounted { session: Some(session), readers, path: path.to_path_buf() })
    }

    /// Sends the kernel invalidations (use off the fuser threads).
    pub fn notifier(&self) -> Option<fuser::Notifier> {
        self.session.as_ref().map(|s| s.notifier())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kernel ended the session (someone ran `fusermount3 -u`).
    pub fn is_finished(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmount and wait for the FUSE threads. A busy mount point (a process
    /// still has its cwd in it) is detached lazily instead.
    pub fn unmount(mut self) -> anyhow::Result<()> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> anyhow::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        self.readers.close();
        if session.guard.is_finished() {
            return session.join().map_err(Into::into);
        }
        match session.umount_and_join() {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, path = %self.path.display(), "unmount failed; detaching lazily");
                unmount_lazy(&self.path)
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_inner() {
            tracing::error!(error = %e, "unmount failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/x\\"), r"/x\\");
    }

    #[test]
    fn the_mount_holding_a_path_is_the_longest_prefix() {
        let (point, fstype, _) = mount_of(Path::new("/proc/self/status")).unwrap();
        assert_eq!((point.as_path(), fstype.as_str()), (Path::new("/proc"), "proc"));
        assert_eq!(mount_of(Path::new("/")).unwrap().0, Path::new("/"));
    }

    #[test]
    fn root_is_a_mount_point_and_missing_paths_are_refused() {
        assert!(is_mount_point(Path::new("/")));
        let err = prepare(Path::new("/nonexistent/imca-mnt")).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
