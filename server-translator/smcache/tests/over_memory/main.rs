//! SMCache on its own: over the memory leaf, with real cache nodes in this
//! process, no storage server, no gateway, no wire.
//!
//! ```text
//!  test ──> SMCache ──> memory leaf (the disk; counts its calls)
//!              │
//!              └──> cache nodes × N (testkit::TestBank; the test peeks at their stores)
//! ```
//!
//! What a storage server promises the gateways: every bank change a
//! mutation implies is confirmed before the mutation is answered (so the
//! tests look at the bank right after a call returns, without waiting);
//! reads populate with add-if-absent semantics (queued, so the tests wait
//! for them); a node that is gone costs misses, never errors.

mod copies;
mod failures;
mod fallocate;
mod namespace;
mod populate;
mod support;
mod writes;
