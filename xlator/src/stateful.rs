//! Translators that keep state a mutation can make stale (SMCache's bank
//! entries, the server's callbacks, a gateway's memo of attributes and
//! names) implement [`Stateful`] rather than [`Translator`].
//!
//! The two traits are generated from the same op table. [`Stateful`]'s
//! reads and controls default to the next translator, as [`Translator`]'s
//! do, but its `data` and `namespace` methods have no default: a new
//! mutation in the table is a compile error ("not all trait items
//! implemented") in every translator that keeps state, until each says what
//! the mutation does to what it keeps. With [`Translator`]'s pass-through
//! default, forgetting one would leave stale state silently. [`InGraph`]
//! puts a `Stateful` in the graph.

use crate::error::{FsError, FsResult};
use crate::translator::{Next, Translator};
use crate::types::*;
use crate::{Made, Removed, Renamed, Upcall};
use async_trait::async_trait;
use std::sync::Arc;

macro_rules! stateful_trait {
    (read { $( $(#[$rdoc:meta])* $rv:ident $rm:ident = $rc:literal ($($ra:ident : $rp:ty as $rw:ty),*) -> $rr:ty; )* }
     data { $( $(#[$ddoc:meta])* $dv:ident $dm:ident = $dc:literal ($($da:ident : $dp:ty as $dw:ty),*) -> $dr:ty; )* }
     namespace { $( $(#[$ndoc:meta])* $nv:ident $nm:ident = $nc:literal ($($na:ident : $np:ty as $nw:ty),*) -> $nr:ty; )* }
     control { $( $(#[$cdoc:meta])* $cv:ident $cm:ident = $cc:literal ($($ca:ident : $cp:ty as $cw:ty),*) -> $cr:ty; )* }) => {
        /// A translator that must say what every mutation does to the state
        /// it keeps (see the module docs).
        #[async_trait]
        pub trait Stateful: Send + Sync + 'static {
            /// Short name for logs and the admin API's pipeline listing.
            fn name(&self) -> &str;

            /// The translator below, if this one passes calls on.
            fn next(&self) -> Option<&Next> {
                None
            }

            /// The next translator, or ENOSYS for a leaf.
            fn below(&self) -> FsResult<&Next> {
                self.next().ok_or(FsError::ENOSYS)
            }

            /// A storage server's callback (see [`crate::Upcall`]): what it
            /// made stale must go before this returns.
            async fn upcall(&self, _upcall: &Upcall) {}

            // reads and controls pass on unless overridden
            $(
                $(#[$rdoc])*
                async fn $rm(&self, $($ra: $rp),*) -> FsResult<$rr> {
                    self.below()?.$rm($($ra),*).await
                }
            )*
            $(
                $(#[$cdoc])*
                async fn $cm(&self, $($ca: $cp),*) -> FsResult<$cr> {
                    self.below()?.$cm($($ca),*).await
                }
            )*

            // every mutation must be placed
            $(
                $(#[$ddoc])*
                async fn $dm(&self, $($da: $dp),*) -> FsResult<$dr>;
            )*
            $(
                $(#[$ndoc])*
                async fn $nm(&self, $($na: $np),*) -> FsResult<$nr>;
            )*
        }

        #[async_trait]
        impl<T: Stateful> Translator for InGraph<T> {
            fn name(&self) -> &str {
                self.0.name()
            }

            fn next(&self) -> Option<&Next> {
                self.0.next()
            }

            async fn upcall(&self, upcall: &Upcall) {
                self.0.upcall(upcall).await
            }

            $(
                async fn $rm(&self, $($ra: $rp),*) -> FsResult<$rr> {
                    self.0.$rm($($ra),*).await
                }
            )*
            $(
                async fn $dm(&self, $($da: $dp),*) -> FsResult<$dr> {
                    self.0.$dm($($da),*).await
                }
            )*
            $(
                async fn $nm(&self, $($na: $np),*) -> FsResult<$nr> {
                    self.0.$nm($($na),*).await
                }
            )*
            $(
                async fn $cm(&self, $($ca: $cp),*) -> FsResult<$cr> {
                    self.0.$cm($($ca),*).await
                }
            )*
        }
    };
}

/// A [`Stateful`] translator as a node of the graph.
pub struct InGraph<T>(pub Arc<T>);

impl<T> InGraph<T> {
    pub fn new(inner: Arc<T>) -> InGraph<T> {
        InGraph(inner)
    }

    /// `x` as a node of the graph, for the translator above it.
    pub fn node(x: T) -> Next
    where
        T: Stateful,
    {
        Arc::new(InGraph(Arc::new(x)))
    }

    pub fn inner(&self) -> &Arc<T> {
        &self.0
    }
}

crate::for_each_fop_by_class!(stateful_trait);
