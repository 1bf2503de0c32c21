//! Translators that answer every operation themselves — the leaves
//! (posix, the memory leaf) and the fan-out (stripe) — implement
//! [`Complete`] rather than [`Translator`].
//!
//! [`Complete`] is generated from the same op table with no default at
//! all, so an operation added to the table is a compile error in each of
//! them ("not all trait items implemented") instead of an `ENOSYS` found at
//! run time. Every `Complete` is a [`Translator`] by the blanket impl below.
//! (It is not re-exported at the crate root, so `use xlator::*` brings only
//! [`Translator`] into scope and calls on a leaf are never ambiguous.)

use crate::error::FsResult;
use crate::translator::{Next, Translator};
use crate::types::*;
use crate::{Made, Removed, Renamed, Upcall};
use async_trait::async_trait;

macro_rules! complete_trait {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        /// A translator that answers every operation of the table itself.
        #[async_trait]
        pub trait Complete: Send + Sync + 'static {
            /// Short name for logs and the admin API's pipeline listing.
            fn name(&self) -> &str;

            /// A callback from the servers, on its way up (see [`Translator::upcall`]).
            async fn upcall(&self, _up: &Upcall) {}

            $(
                $(#[$doc])*
                async fn $m(&self, $($a: $p),*) -> FsResult<$r>;
            )*
        }

        #[async_trait]
        impl<T: Complete> Translator for T {
            fn name(&self) -> &str {
                Complete::name(self)
            }

            fn next(&self) -> Option<&Next> {
                None
            }

            async fn upcall(&self, up: &Upcall) {
                Complete::upcall(self, up).await
            }

            $(
                async fn $m(&self, $($a: $p),*) -> FsResult<$r> {
                    Complete::$m(self, $($a),*).await
                }
            )*
        }
    };
}

crate::for_each_fop!(complete_trait);
