//! Thin, safe wrappers over the Linux calls the posix translator needs.
//! Everything is fd-relative: objects are held as `O_PATH` fds and reached
//! from the export root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`,
//! so no path the client sends can leave the export.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub type Stat = libc::stat;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

pub fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

pub fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| err(libc::EINVAL))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: the kernel just returned this fd to us and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Like [`open_beneath`] but only from the kernel's dentry cache
/// (`RESOLVE_CACHED`): never blocks on disk; `EAGAIN` when something is not
/// cached. Lets a hot lookup or stat run on the async thread.
pub fn open_beneath_cached(dir: RawFd, path: &str, flags: i32) -> io::Result<OwnedFd> {
    let p = cstr(if path.is_empty() { "." } else { path })?;
    // SAFETY: as in open_beneath.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve =
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_CACHED;
    let r = unsafe {
        libc::syscall(libc::SYS_openat2, dir, p.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    owned(r as libc::c_int)
}

/// One `preadv2(RWF_NOWAIT)` attempt to fill `spare` from the page cache
/// only: `Ok(Some(n))` = n bytes (short only at EOF), `Ok(None)` = some of
/// it is not cached (the caller falls back to a blocking read).
pub fn pread_nowait(fd: RawFd, spare: &mut [std::mem::MaybeUninit<u8>], off: u64) -> io::Result<Option<usize>> {
    let mut done = 0;
    while done < spare.len() {
        let iov = libc::iovec { iov_base: spare[done..].as_mut_ptr().cast(), iov_len: spare.len() - done };
        let o = i64::try_from(off + done as u64).map_err(|_| err(libc::EINVAL))?;
        // SAFETY: the iovec covers writable memory we own.
        let r = unsafe { libc::preadv2(fd, &iov, 1, o, libc::RWF_NOWAIT) };
        match cvt_size(r) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(done))
}

/// Open `path` (relative, already validated) beneath `root`, refusing any
/// symlink on the way and any escape. With `O_PATH | O_NOFOLLOW` a trailing
/// symlink yields an fd on the link itself.
pub fn open_beneath(root: RawFd, path: &str, flags: i32) -> io::Result<OwnedFd> {
    let p = cstr(if path.is_empty() { "." } else { path })?;
    // SAFETY: open_how is plain data; zero is a valid value for every field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid pointers for the duration of the call.
    let r = unsafe {
        libc::syscall(libc::SYS_openat2, root, p.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    owned(r as libc::c_int)
}

/// [`open_beneath`] of a path of any length: one syscall's path is limited
/// to PATH_MAX, a tree is not, so a longer path is opened a run of
/// components at a time, each run beneath the directory the last one
/// reached (so still confined, still refusing symlinks).
pub fn open_beneath_long(root: RawFd, path: &str, flags: i32) -> io::Result<OwnedFd> {
    const RUN: usize = libc::PATH_MAX as usize - 1;
    if path.len() < RUN {
        return open_beneath(root, path, flags);
    }
    let mut at: Option<OwnedFd> = None;
    let mut rest = path;
    while rest.len() >= RUN {
        // The longest run of whole components that fits (names are at
        // most 255 bytes, so there always is one).
        let cut = rest.as_bytes()[..RUN].iter().rposition(|&b| b == b'/').ok_or_else(|| err(libc::ENAMETOOLONG))?;
        let dir = at.as_ref().map_or(root, AsRawFd::as_raw_fd);
        at = Some(open_beneath(dir, &rest[..cut], libc::O_PATH | libc::O_DIRECTORY)?);
        rest = &rest[cut + 1..];
    }
    open_beneath(at.as_ref().map_or(root, AsRawFd::as_raw_fd), rest, flags)
}

/// `openat` of a single, validated name.
pub fn openat(dir: RawFd, name: &str, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let n = cstr(name)?;
    // SAFETY: valid C string.
    owned(unsafe { libc::openat(dir, n.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) })
}

/// Re-open an `O_PATH` fd with real access (through its /proc magic link).
pub fn reopen(fd: RawFd, flags: i32) -> io::Result<OwnedFd> {
    let p = proc_path(fd);
    // SAFETY: valid C string.
    owned(unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC) })
}

pub fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).unwrap()
}

pub fn fstat(fd: RawFd) -> io::Result<Stat> {
    // SAFETY: st is written by the kernel.
    let mut st: Stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstatat(fd, c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

pub fn fstatat(dir: RawFd, name: &str) -> io::Result<Stat> {
    let n = cstr(name)?;
    // SAFETY: as above.
    let mut st: Stat = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstatat(dir, n.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st)
}

pub fn mkdirat(dir: RawFd, name: &str, mode: u32) -> io::Result<()> {
    let n = cstr(name)?;
    cvt(unsafe { libc::mkdirat(dir, n.as_ptr(), mode) }).map(drop)
}

pub fn mknodat(dir: RawFd, name: &str, mode: u32, rdev: u64) -> io::Result<()> {
    let n = cstr(name)?;
    cvt(unsafe { libc::mknodat(dir, n.as_ptr(), mode, rdev) }).map(drop)
}

pub fn symlinkat(target: &str, dir: RawFd, name: &str) -> io::Result<()> {
    let (t, n) = (cstr(target)?, cstr(name)?);
    cvt(unsafe { libc::symlinkat(t.as_ptr(), dir, n.as_ptr()) }).map(drop)
}

pub fn unlinkat(dir: RawFd, name: &str, flags: i32) -> io::Result<()> {
    let n = cstr(name)?;
    cvt(unsafe { libc::unlinkat(dir, n.as_ptr(), flags) }).map(drop)
}

pub fn renameat2(od: RawFd, on: &str, nd: RawFd, nn: &str, flags: u32) -> io::Result<()> {
    let (a, b) = (cstr(on)?, cstr(nn)?);
    cvt(unsafe { libc::renameat2(od, a.as_ptr(), nd, b.as_ptr(), flags) }).map(drop)
}

/// Hard-link the object behind an `O_PATH` fd as `dir/name`. `AT_EMPTY_PATH`
/// needs CAP_DAC_READ_SEARCH; without it, regular files still link through
/// their /proc magic link.
pub fn link_fd(fd: RawFd, dir: RawFd, name: &str) -> io::Result<()> {
    let n = cstr(name)?;
    let r = cvt(unsafe { libc::linkat(fd, c"".as_ptr(), dir, n.as_ptr(), libc::AT_EMPTY_PATH) });
    match r {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) || e.raw_os_error() == Some(libc::EPERM) => {
            let p = proc_path(fd);
            cvt(unsafe { libc::linkat(libc::AT_FDCWD, p.as_ptr(), dir, n.as_ptr(), libc::AT_SYMLINK_FOLLOW) }).map(drop)
        }
        r => r.map(drop),
    }
}

pub fn readlink_fd(fd: RawFd) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    let n = cvt_size(unsafe { libc::readlinkat(fd, c"".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    buf.truncate(n);
    Ok(buf)
}

pub fn chmod_fd(fd: RawFd, perm: u32) -> io::Result<()> {
    let p = proc_path(fd);
    cvt(unsafe { libc::fchmodat(libc::AT_FDCWD, p.as_ptr(), perm, 0) }).map(drop)
}

pub fn chown_fd(fd: RawFd, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
    let (u, g) = (uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX));
    cvt(unsafe { libc::fchownat(fd, c"".as_ptr(), u, g, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW) }).map(drop)
}

/// `None` leaves a time alone; `Some(None)` sets it to now.
pub fn utimens_fd(fd: RawFd, atime: Option<Option<(i64, u32)>>, mtime: Option<Option<(i64, u32)>>) -> io::Result<()> {
    let ts = |t: Option<Option<(i64, u32)>>| match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(None) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(Some((s, n))) => libc::timespec { tv_sec: s, tv_nsec: n as i64 },
    };
    let times = [ts(atime), ts(mtime)];
    let p = proc_path(fd);
    cvt(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), times.as_ptr(), 0) }).map(drop)
}

pub fn ftruncate(fd: RawFd, size: u64) -> io::Result<()> {
    let size = i64::try_from(size).map_err(|_| err(libc::EFBIG))?;
    cvt(unsafe { libc::ftruncate(fd, size) }).map(drop)
}

pub fn fsync(fd: RawFd, datasync: bool) -> io::Result<()> {
    cvt(unsafe { if datasync { libc::fdatasync(fd) } else { libc::fsync(fd) } }).map(drop)
}

/// Read into `spare`, the uninitialised tail of a buffer, without zeroing it
/// first; returns how many leading bytes are now initialised
/// (short only at end of file).
pub fn pread_uninit(fd: RawFd, spare: &mut [std::mem::MaybeUninit<u8>], off: u64) -> io::Result<usize> {
    // SAFETY: the kernel only writes into the range; we never read it here.
    unsafe { pread_raw(fd, spare.as_mut_ptr().cast(), spare.len(), off) }
}

/// # Safety
/// `ptr..ptr+len` must be writable memory.
unsafe fn pread_raw(fd: RawFd, ptr: *mut u8, len: usize, off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < len {
        let o = i64::try_from(off + done as u64).map_err(|_| err(libc::EINVAL))?;
        let r = libc::pread64(fd, ptr.add(done).cast(), len - done, o);
        match cvt_size(r) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Write all of `buf` at `off`; an error after a partial write reports the
/// bytes written (the caller sees a short write, then the error on retry).
pub fn pwrite_full(fd: RawFd, buf: &[u8], off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        let o = i64::try_from(off + done as u64).map_err(|_| err(libc::EFBIG))?;
        let r = unsafe { libc::pwrite64(fd, buf[done..].as_ptr().cast(), buf.len() - done, o) };
        match cvt_size(r) {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if done > 0 => {
                tracing::debug!("short write after {done} bytes: {e}");
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

pub fn fstatvfs(fd: RawFd) -> io::Result<libc::statvfs> {
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    cvt(unsafe { libc::fstatvfs(fd, &mut s) })?;
    Ok(s)
}

// Extended attributes go through the fd's /proc magic link with the
// following variants: the jump lands on the object itself, even a symlink,
// which `f*xattr` cannot do on an O_PATH fd.

pub fn getxattr(fd: RawFd, name: &str, buf: &mut [u8]) -> io::Result<usize> {
    let (p, n) = (proc_path(fd), cstr(name)?);
    cvt_size(unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

pub fn setxattr(fd: RawFd, name: &str, value: &[u8], flags: i32) -> io::Result<()> {
    let (p, n) = (proc_path(fd), cstr(name)?);
    cvt(unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) }).map(drop)
}

// Directory markers are ordinary files the daemon opens itself: plain
// `f*xattr` on a real fd, no /proc jump.

pub fn fgetxattr(fd: RawFd, name: &str, buf: &mut [u8]) -> io::Result<usize> {
    let n = cstr(name)?;
    cvt_size(unsafe { libc::fgetxattr(fd, n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

pub fn fsetxattr(fd: RawFd, name: &str, value: &[u8]) -> io::Result<()> {
    let n = cstr(name)?;
    cvt(unsafe { libc::fsetxattr(fd, n.as_ptr(), value.as_ptr().cast(), value.len(), 0) }).map(drop)
}

pub fn listxattr(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let p = proc_path(fd);
    cvt_size(unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })
}

pub fn removexattr(fd: RawFd, name: &str) -> io::Result<()> {
    let (p, n) = (proc_path(fd), cstr(name)?);
    cvt(unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) }).map(drop)
}

pub fn lseek(fd: RawFd, off: u64) -> io::Result<()> {
    let r = unsafe { libc::lseek64(fd, off as i64, libc::SEEK_SET) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One raw `getdents64` batch into `buf`; returns the bytes filled (0 = end).
pub fn getdents(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let r = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
    cvt_size(r as isize)
}

pub fn random_u128() -> u128 {
    let mut b = [0u8; 16];
    let mut got = 0;
    while got < 16 {
        let r = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), 16 - got, 0) };
        if r > 0 {
            got += r as usize;
        }
    }
    u128::from_le_bytes(b)
}

pub fn euid_is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// fallocate(2) of `len` bytes at `off` with Linux's `mode` flags.
pub fn fallocate(fd: RawFd, mode: i32, off: u64, len: u64) -> io::Result<()> {
    let off = i64::try_from(off).map_err(|_| err(libc::EFBIG))?;
    let len = i64::try_from(len).map_err(|_| err(libc::EFBIG))?;
    loop {
        match cvt(unsafe { libc::fallocate(fd, mode, off, len) }) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r.map(drop),
        }
    }
}
