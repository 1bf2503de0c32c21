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

/// What unlink/rmdir removed: the victim's id and, when it still has other
/// hard links, its attributes afterwards (nlink decremented).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Removed {
    pub fid: FileId,
    pub remaining: Option<Attr>,
}

/// What rename moved and, when it replaced an existing target, what happened
/// to the target (same shape as unlink's answer).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Renamed {
    pub moved: FileId,
    pub replaced: Option<Removed>,
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
