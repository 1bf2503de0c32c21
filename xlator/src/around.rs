//! Translators that only wrap calls: one generic hook instead of one
//! override per operation.
//!
//! io-stats (and anything like it: tracing, a latency injector) does the same
//! thing around every operation. It implements [`Around`] once; [`Wrap`]
//! turns it into a full [`Translator`] whose every method — generated from
//! the op table — calls the hook with the operation and the call below.

use crate::error::FsResult;
use crate::fops::Fop;
use crate::translator::{Next, Translator};
use crate::types::*;
use crate::{Made, Removed, Renamed};
use async_trait::async_trait;
use std::future::Future;

/// What runs around every call passed to the next translator.
pub trait Around: Send + Sync + 'static {
    /// The translator's name in the graph listing.
    fn name(&self) -> &str;

    /// Run `call` (the operation `fop` on the next translator) and return
    /// its result; may time it, count it, log it, but not change its type.
    fn around<'a, T: Send + 'a>(
        &'a self,
        fop: Fop,
        call: impl Future<Output = FsResult<T>> + Send + 'a,
    ) -> impl Future<Output = FsResult<T>> + Send + 'a;
}

/// An [`Around`] hook in the graph, over `next`.
pub struct Wrap<A> {
    hook: A,
    next: Next,
}

impl<A: Around> Wrap<A> {
    pub fn new(hook: A, next: Next) -> Wrap<A> {
        Wrap { hook, next }
    }

    pub fn hook(&self) -> &A {
        &self.hook
    }
}

macro_rules! wrap_impl {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        #[async_trait]
        impl<A: Around> Translator for Wrap<A> {
            fn name(&self) -> &str {
                self.hook.name()
            }

            fn next(&self) -> Option<&Next> {
                Some(&self.next)
            }

            $(
                async fn $m(&self, $($a: $p),*) -> FsResult<$r> {
                    self.hook.around(Fop::$v, self.next.$m($($a),*)).await
                }
            )*
        }
    };
}

crate::for_each_fop!(wrap_impl);
