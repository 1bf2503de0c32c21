//! # admin — the gateway's admin HTTP API
//!
//! Operators read and change a volume's cache configuration here, live and
//! cluster-wide, without remounting anything. Every gateway (`imca mount
//! --admin ADDR`) serves this API; `imca ctl` is its command-line face.
//!
//! ```text
//!  imca ctl / curl ──HTTP──> admin::serve (axum)
//!                               │  validate (options table, limits), auth (bearer token)
//!                               v
//!                         dyn AdminBackend  (gateway/src/admin.rs: the real one)
//!                               │  rollout: SetVolumeConfig(epoch+1) → server 0 (authority), then the rest
//!                               v
//!                         storage servers ──stamp epoch on every reply──> every gateway
//! ```
//!
//! The crate knows nothing about FUSE, translators or the wire protocol: the
//! gateway plugs those in through [`AdminBackend`] (status, config, flush)
//! and [`rollout::VolumeServers`] (read/compare-and-set each server's copy of
//! the config). [`lease`] is how every gateway holds that config (renewed
//! from server 0 every half lease, withdrawn when it cannot be renewed) and
//! hands it to CMCache. Keeping the HTTP layer, the validation rules and the rollout
//! order here lets them be tested in-process with a fake backend, while the
//! whole-system tests in `imca/tests/ops_*.rs` exercise the real one.
//!
//! Task model: one axum server task per gateway; handlers are short and call
//! the backend, which does the network work (probing a cache node, rolling a
//! new config out to the storage servers) with its own timeouts.

pub mod auth;
mod backend;
pub mod client;
pub mod config;
pub mod fence;
mod http;
pub mod lease;
pub mod openapi;
pub mod options;
pub mod probe;
pub mod rollout;

pub use backend::{
    AdminBackend, AdminError, FlushReport, GatewayInfo, NodeFlush, NodeStatus, OpHitRatio, ServerStatus, Status,
};
pub use config::{ConfigUpdate, Limits};
pub use http::{router, serve};
