//! # daemon — the skeleton every IMCa daemon shares
//!
//! `imca cache-node`, `imca storage` and `imca mount` differ in what they
//! serve, not in how they live and die. The common part is here, once:
//!
//! ```text
//!  main(args) ── builds its runtime ──> run(args, daemon::signals())
//!                                         │
//!   start: bind listeners ─────────────────┤  every task holds a Shutdown token
//!          Registry::new() ── passed down ─┤  (translators, bank, servers
//!          serve_metrics(registry) ────────┤   register their metrics in it)
//!          write_ready_file(path, json) ───┘  last: the daemon is usable
//!                                         │
//!   shutdown future resolves (SIGINT/SIGTERM, or a test's handle)
//!          Drain::drain(bound): broadcast stop ──> tasks finish their
//!          in-flight work and drop their tokens ──> returns when all are
//!          gone, or when the bound runs out (a stuck peer cannot hold
//!          shutdown forever)
//! ```
//!
//! - [`signals`]: resolves on SIGINT or SIGTERM.
//! - [`Drain`] / [`Shutdown`]: mini-redis's graceful shutdown. The daemon
//!   keeps the `Drain`; every task it spawns gets a `Shutdown` token, waits
//!   on it for the stop broadcast, and is counted as running until it drops
//!   the token. Dropping the `Drain` without draining also stops everything.
//! - [`write_ready_file`]: the `--ready-file` convention (PATH.tmp, then a
//!   rename), so tests and `imca up` wait on readiness, never on time.
//! - [`serve_metrics`] / [`spawn_metrics`]: `GET /metrics` in Prometheus'
//!   text format from one `prometheus::Registry`, with a refresh hook run
//!   before each scrape (for gauges read from elsewhere, like open fds).
//! - [`peer`] / [`crowd`]: who is at the other end of a TCP connection (a
//!   local uid, or a remote IP), and per-peer connection caps that shed
//!   connections not yet proven (no request head, no login) before refusing
//!   a newcomer; the admin API and the cache node's acceptor use them.
//!
//! ## One registry per daemon
//!
//! Each daemon makes its own `prometheus::Registry` and hands it to whatever
//! registers metrics (its translators, the cache-bank client, the RPC
//! server). Nothing registers in the process-wide default registry, so
//! several daemons in one process (tests) never collide on a metric name,
//! and each `/metrics` shows its own daemon only.

mod credentials;
pub mod crowd;
mod metrics;
pub mod peer;
mod ready;
mod shutdown;
mod signals;

pub use credentials::Credentials;
pub use crowd::{Crowd, CrowdLimits, Refused, Ticket};
pub use peer::Peer;
pub use metrics::{metrics_url, render, serve_metrics, spawn_metrics};
pub use ready::write_ready_file;
pub use shutdown::{Drain, Shutdown};
pub use signals::signals;
