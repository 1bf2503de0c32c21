//! # testkit — what a translator's own tests stand on
//!
//! ```text
//!  test ──> [CMCache ->] SMCache ──> memory leaf          (the stack: tests/support/ of each crate)
//!                │    │
//!                │    └── TestVolume: the volume config, as the servers' and the gateways' watch channels
//!                v
//!           TestBank: N real cache nodes (cache_node::start on 127.0.0.1:0) in this process
//!                └── View: the bank under one config — peek at stat/dentry/block keys, plant values
//! ```
//!
//! A dev-dependency only. It depends on neither `cmcache` nor `smcache`, so
//! both can use it without a dependency cycle; each crate's
//! `tests/support/` builds its translator over these parts in a few lines.
//!
//! Nothing here sleeps to wait for start-up: a node is listening when
//! [`TestBank::start`] returns. [`eventually`] polls a condition for the
//! one thing that is asynchronous by design (SMCache's queued populates).

mod bank;
mod config;
mod files;
mod tmpfs;

pub use bank::{bank_options, value_key, NodeState, TestBank, View};
pub use config::TestVolume;
pub use files::{at, fid, new_file, nf, path, root};
pub use tmpfs::Tmpfs;
pub use memory::{memory, Memory};
/// The volume config types, re-exported so tests name them in one place.
pub use volume::{CacheConfig, FenceRequests, Placement};

use std::time::{Duration, Instant};

/// Wait until `cond` holds (polling every millisecond), or fail the test
/// after five seconds naming `what`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
