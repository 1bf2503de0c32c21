//! The `Translator` trait: one async method per file operation, generated
//! from the table in [`crate::fops`].
//!
//! Like GlusterFS's `_default_fops`, every method defaults to handing the call
//! to the next translator unchanged, so a translator overrides only what it
//! changes (CMCache overrides lookup/getattr/read; SMCache wraps the
//! mutations; io-stats wraps every call through [`crate::Around`]). Leaves (posix, protocol-client) and fan-out
//! translators (stripe) override every method and return `None` from
//! [`Translator::next`]; a call that reaches a translator with neither an
//! override nor a next one fails with `ENOSYS` rather than panicking.

use crate::error::{FsError, FsResult};
use crate::types::*;
use async_trait::async_trait;
use std::sync::Arc;

/// The translator below this one.
pub type Next = Arc<dyn Translator>;

/// What a create, mkdir, mknod, symlink or link made: the new name's
/// object, and the directory it was added to as it is just after (NFSv3's
/// post-op attributes), so a gateway need not ask for them again. `dir` is
/// None when not every server gave its copy.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Made {
    pub attr: Attr,
    pub dir: Option<Attr>,
}

/// What unlink/rmdir removed: the victim's id and, when it still has other
/// hard links, its attributes afterwards (nlink decremented); and the
/// directory's attributes just after, as [`Made::dir`] (None in a rename's
/// `replaced`: the rename's own carry them).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Removed {
    pub fid: FileId,
    pub remaining: Option<Attr>,
    pub dir: Option<Attr>,
}

/// What rename moved and, when it replaced an existing target, what happened
/// to the target (same shape as unlink's answer); and both directories'
/// attributes just after, as [`Made::dir`] (the same when the rename stays
/// in one directory); and the moved object's attributes just after (its
/// ctime changed), so that what a rename leaves needs no lookup.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Renamed {
    pub moved: FileId,
    pub replaced: Option<Removed>,
    pub dir: Option<Attr>,
    pub newdir: Option<Attr>,
    pub moved_attr: Option<Attr>,
}

/// What a gateway must drop from what it keeps of the storage servers'
/// state: a storage server's callback names these (`wire` carries them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Invalidation {
    /// The file's attributes; with `offset >= 0` also its cached pages from
    /// `offset` for `len` bytes (`len` 0: to the end).
    Inode { fid: FileId, offset: i64, len: i64 },
    /// The name `name` in directory `parent`.
    Entry { parent: FileId, name: String },
    /// Everything: the server could not keep this session's queue.
    All,
}

impl Invalidation {
    /// Attributes only.
    pub fn attrs(fid: FileId) -> Invalidation {
        Invalidation::Inode { fid, offset: -1, len: 0 }
    }

    /// Attributes and the pages of `len` bytes at `offset` (0: to the end).
    pub fn data(fid: FileId, offset: u64, len: u64) -> Invalidation {
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        Invalidation::Inode { fid, offset, len: i64::try_from(len).unwrap_or(0) }
    }

    pub fn entry(parent: FileId, name: &str) -> Invalidation {
        Invalidation::Entry { parent, name: name.to_string() }
    }
}

/// A storage server's word to a gateway outside any call (GlusterFS's
/// upcall): one answer to the gateway's poll of that server. It enters the
/// client graph at the server's leaf (protocol-client) and the graph hands
/// it to every translator from that leaf up to the top, each awaited
/// before the next, so a translator hears it after those below it acted.
/// The server's changes wait until the last one returned (the poll that
/// acknowledges `seq` follows), so a translator that keeps state drops what
/// `items` made stale before [`Translator::upcall`] returns.
#[derive(Clone, Debug, Default)]
pub struct Upcall {
    /// which storage server (its place in the stripe order)
    pub server: usize,
    /// it did not know this gateway's session (a restart, or an expired
    /// session it dropped): what it kept for the gateway (holds, locks) is gone
    pub session_lost: bool,
    /// the gateway's lease there ran out before this renewal: its locks
    /// there may be gone
    pub lease_lapsed: bool,
    /// what changes made through other gateways made stale
    pub items: Vec<Invalidation>,
    /// the server's count of items sent so far (acknowledged once every
    /// translator heard them)
    pub seq: u64,
    /// the lease granted by this answer ends then (None: none granted)
    pub lease_until: Option<std::time::Instant>,
}

macro_rules! translator_trait {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        /// One async method per file operation (the table in [`crate::fops`]),
        /// each defaulting to the next translator.
        #[async_trait]
        pub trait Translator: Send + Sync + 'static {
            /// Short name for logs and the admin API's pipeline listing.
            fn name(&self) -> &str;

            /// The translator below, if this one passes calls on.
            fn next(&self) -> Option<&Next> {
                None
            }

            /// The next translator, or ENOSYS for a leaf that did not override a call.
            fn below(&self) -> FsResult<&Next> {
                self.next().ok_or(FsError::ENOSYS)
            }

            /// A storage server's callback reached this translator on its
            /// way up the graph (see [`Upcall`]); by default it keeps nothing
            /// a callback could make stale.
            async fn upcall(&self, _upcall: &Upcall) {}

            $(
                $(#[$doc])*
                async fn $m(&self, $($a: $p),*) -> FsResult<$r> {
                    self.below()?.$m($($a),*).await
                }
            )*
        }
    };
}

crate::for_each_fop!(translator_trait);
