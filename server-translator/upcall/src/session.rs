//! The gateway session a request came in (GlusterFS's `frame->root->client`):
//! protocol-server runs each file operation inside [`scope`], and the
//! server translators that keep per-gateway state (locks, upcall, the
//! gateways' opens) read it with [`current`].
//!
//! A tokio task-local rather than an argument of every fop: the op table,
//! and so every translator's signature, stays the same on both sides of the
//! wire. It does not follow a call into a task spawned below (SMCache's
//! repopulates), which no translator needs. Outside a scope (tests calling
//! a translator directly, a tool) it reads [`NO_SESSION`], as a request
//! without a session envelope does.

use std::future::Future;
pub use wire::NO_SESSION;

tokio::task_local! {
    static SESSION: u64;
}

/// Run `call` as a request of gateway `session`.
pub async fn scope<F: Future>(session: u64, call: F) -> F::Output {
    SESSION.scope(session, call).await
}

/// The session of the request being served ([`NO_SESSION`] outside one).
pub fn current() -> u64 {
    SESSION.try_with(|s| *s).unwrap_or(NO_SESSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_sees_its_session_and_nothing_outside_it() {
        assert_eq!(current(), NO_SESSION);
        assert_eq!(scope(7, async { current() }).await, 7);
        assert_eq!(scope(7, scope(8, async { current() })).await, 8);
        assert_eq!(current(), NO_SESSION);
    }
}
