//! # admin — the gateway's admin HTTP API
//!
//! Operators read and change a volume's cache configuration here, live and
//! cluster-wide, without remounting anything. Every gateway (`imca mount
//! --admin ADDR`) serves this API; `imca ctl` is its command-line face.
//!
//! ```text
//!  imca ctl / curl ──HTTP/1.1──> admin::serve: server.rs (per-uid/IP and total caps, head timeout, head size)
//!                               │  auth.rs (changes: always the bearer token; reads: open on loopback)
//!                               │  limits.rs (body ≤ 64 KiB, within 10 s) → axum routes (http.rs)
//!                               │  volume::change::admit (options table, limits, probe)
//!                               v
//!                         dyn AdminBackend  (gateway/src/admin.rs: the real one)
//!                               │  volume::rollout: SetVolumeConfig(epoch+1) → server 0 (authority), then the rest
//!                               v
//!                         storage servers ──stamp epoch on every reply──> every gateway
//! ```
//!
//! This crate is only the HTTP face: routes, auth, JSON shapes, the client
//! `imca ctl` uses and the OpenAPI document. What a valid config is, how a
//! change is admitted (validated, joining nodes probed) and installed, the
//! lease, fencing and rollout are the `volume` crate's; every change made
//! here goes through `volume::change::admit`, as `imca mount --cache-nodes`
//! does. The gateway plugs itself in through [`AdminBackend`] (status,
//! config, limits, apply, flush), so the HTTP layer is tested in-process
//! with a fake backend, while the whole-system tests in
//! `imca/tests/ops_*.rs` exercise the real one.
//!
//! Task model: one accept task per gateway and one task per connection (at
//! most [`limits::MAX_CONNECTIONS`], [`limits::MAX_CONNECTIONS_PER_PEER`] of
//! one local uid or remote IP; connections with no request head in are shed
//! first when full); handlers are short and call
//! the backend, which does the network work (probing a cache node, rolling a
//! new config out to the storage servers) with its own timeouts.

pub mod auth;
mod backend;
pub mod client;
mod http;
pub mod limits;
pub mod openapi;
mod server;

pub use backend::{
    AdminBackend, AdminError, BankBypass, FlushReport, GatewayInfo, Heals, NodeFlush, NodeStatus, OpHitRatio, ServerStatus, Status,
};
pub use auth::Auth;
pub use http::{parse_update, router, serve, serve_with};
pub use limits::ServerLimits;
/// The config types this API reads and writes, from their home.
pub use volume::{CacheConfig, ConfigUpdate, Limits};
