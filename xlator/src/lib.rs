//! # xlator — the translator pipeline's common language
//!
//! Every file operation in IMCa travels down a chain of *translators*, exactly
//! as in GlusterFS. This crate holds what every link of that chain agrees on:
//! the operation and reply types ([`types`]), the errno-carrying error
//! ([`FsError`]) and the [`Translator`] trait with one async method per file
//! operation, each defaulting to "pass to the next translator".
//!
//! ```text
//!  gateway (imca mount)                          storage server (imca storage)
//!  FUSE -> coherence -> io-stats -> CMCache -> stripe -> protocol-client ==wire==> protocol-server
//!                                                            -> locks -> gateway-opens -> upcall -> SMCache -> posix
//! ```
//!
//! Files are named two ways at once: by a [`Loc`] path relative to the export
//! root (what namespace operations need) and by a 128-bit [`FileId`] assigned
//! at create and identical on every storage server (what data operations and
//! cache keys need — a path breaks on rename, a file id does not).
//!
//! Nothing here does I/O; the crate is the contract between the others.

mod around;
pub mod lock_table;
pub mod complete;
mod copy_span;
mod error;
pub mod fops;
mod stateful;
mod merge;
pub mod names;
mod translator;
pub mod types;

pub use copy_span::{CopySpan, MAX_COPY_RANGE};
pub use error::{FsError, FsResult};
pub use around::{Around, Wrap};
pub use fops::{AsParam, Fop, OpClass, ToWire};
pub use stateful::{InGraph, Stateful};
pub use translator::{Invalidation, Made, Next, Removed, Renamed, Translator, Upcall};
pub use types::*;

/// Largest xattr value (Linux's XATTR_SIZE_MAX): the reply bulk a getxattr
/// caller must accept.
pub const XATTR_SIZE_MAX: usize = 64 * 1024;

/// Objects one `getattrs` call may ask about (a listing batch is 256).
pub const MAX_GETATTRS: usize = 1024;
