//! CMCache on its own: gateways' CMCache over one storage server's SMCache
//! over the memory leaf, with real cache nodes in this process — no FUSE,
//! no stripe, no wire.
//!
//! ```text
//!  test ──> CMCache × G ──> SMCache ──> memory leaf (the disk, and the oracle: it counts its calls)
//!               │              │
//!               └──────────────┴──> cache nodes × N (testkit::TestBank)
//! ```
//!
//! Hits are shown by what did *not* reach the leaf (its per-operation call
//! counts), never by timing; coherence by comparing every answer with the
//! leaf's own.

mod bypass;
mod coherence;
mod hits;
mod listing;
mod support;
