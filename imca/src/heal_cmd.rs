//! `imca heal DIR`: repair the storage servers' namespace under a
//! directory of a mounted IMCa volume, after a server crashed in the
//! middle of a change (docs/operations.md, "After a storage server crashed").
//!
//! The walk itself runs in the gateway (stripe's heal: every server's names
//! looked up, followers made to agree with server 0), started by setting
//! the `trusted.imca.heal` xattr on the directory, which only root may set
//! and which the gateway never stores. This command checks first that DIR
//! is in an IMCa mount: on any other file system that xattr would simply be
//! written.

use anyhow::{bail, Context};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The xattr the gateway's stripe answers with a heal walk.
const HEAL_XATTR: &str = "trusted.imca.heal";

#[derive(clap::Args)]
pub struct Args {
    /// A directory of a mounted IMCa volume (its mount point heals it all).
    /// Needs root. Progress goes to the gateway's log.
    dir: PathBuf,
}

pub fn main(args: Args) -> anyhow::Result<()> {
    let dir = std::fs::canonicalize(&args.dir).with_context(|| format!("{}", args.dir.display()))?;
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let mount = imca_mount_of(&dir)?;
    eprintln!("healing {} (IMCa mount {}); progress is in the gateway's log", dir.display(), mount.display());
    let started = Instant::now();
    let path = CString::new(dir.as_os_str().as_bytes())?;
    let name = CString::new(HEAL_XATTR)?;
    // SAFETY: valid C strings and a one-byte value.
    let r = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
    if r == 0 {
        println!("healed {}: the storage servers agree under it ({:.1} s)", dir.display(), started.elapsed().as_secs_f64());
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) => bail!(
            "some entries under {} still differ after the walk's passes (changes were under way, or a server is down); run `imca heal` again",
            dir.display()
        ),
        Some(libc::EPERM) | Some(libc::EACCES) => bail!("healing needs root (the walk is started through a trusted.* xattr): {e}"),
        _ => bail!("heal walk of {}: {e}", dir.display()),
    }
}

/// The mount point of the IMCa mount that holds `dir`.
fn imca_mount_of(dir: &Path) -> anyhow::Result<PathBuf> {
    let (point, fstype, source) = gateway::mount::mount_of(dir).context("no mount holds this directory")?;
    if !(fstype == "fuse.imca" || (fstype == "fuse" && source == "imca")) {
        bail!("{} is not in an IMCa mount (it is on {} at {})", dir.display(), fstype, point.display());
    }
    Ok(point)
}
