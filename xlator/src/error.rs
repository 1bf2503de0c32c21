//! The one error type that crosses translator boundaries: an errno.
//!
//! File systems speak errno, FUSE answers errno, and the wire carries errno, so
//! the pipeline does too. Context (which server, which path) is logged where
//! the error arises; what travels is the number the application will see.

use std::fmt;

/// A POSIX errno, as the application will see it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FsError(pub i32);

pub type FsResult<T> = Result<T, FsError>;

impl FsError {
    pub const EPERM: FsError = FsError(libc::EPERM);
    pub const ENOENT: FsError = FsError(libc::ENOENT);
    pub const EIO: FsError = FsError(libc::EIO);
    pub const EBADF: FsError = FsError(libc::EBADF);
    pub const EACCES: FsError = FsError(libc::EACCES);
    pub const EEXIST: FsError = FsError(libc::EEXIST);
    pub const EXDEV: FsError = FsError(libc::EXDEV);
    pub const ENOTDIR: FsError = FsError(libc::ENOTDIR);
    pub const EISDIR: FsError = FsError(libc::EISDIR);
    pub const EINVAL: FsError = FsError(libc::EINVAL);
    pub const EFBIG: FsError = FsError(libc::EFBIG);
    pub const ENOSPC: FsError = FsError(libc::ENOSPC);
    pub const ENAMETOOLONG: FsError = FsError(libc::ENAMETOOLONG);
    pub const ENOSYS: FsError = FsError(libc::ENOSYS);
    pub const ENOTEMPTY: FsError = FsError(libc::ENOTEMPTY);
    pub const ENODATA: FsError = FsError(libc::ENODATA);
    pub const ERANGE: FsError = FsError(libc::ERANGE);
    pub const ESTALE: FsError = FsError(libc::ESTALE);
    pub const ETIMEDOUT: FsError = FsError(libc::ETIMEDOUT);
    pub const ENOTSUP: FsError = FsError(libc::ENOTSUP);
    pub const EILSEQ: FsError = FsError(libc::EILSEQ);
    pub const ELOOP: FsError = FsError(libc::ELOOP);

    pub fn errno(self) -> i32 {
        self.0
    }
}

impl From<std::io::Error> for FsError {
    /// An OS error keeps its errno; anything else (a codec or transport
    /// failure dressed as io::Error) is an I/O error to the application.
    fn from(e: std::io::Error) -> Self {
        FsError(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl From<FsError> for std::io::Error {
    /// The errno, for code that speaks `io::Result` (the posix leaf).
    fn from(e: FsError) -> Self {
        std::io::Error::from_raw_os_error(e.0)
    }
}

impl fmt::Debug for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FsError({}: {})", self.0, std::io::Error::from_raw_os_error(self.0))
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

impl std::error::Error for FsError {}
