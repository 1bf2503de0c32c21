//! # volume — the volume's control plane
//!
//! A volume's cache configuration (cache-node pool, block size, placement,
//! epoch, lease), the rules it must follow, and how it is kept and changed.
//! Every storage server holds the config in a [`Volume`] authority
//! (persisted in `EXPORT/.imca/volume.json`, changed only by compare-and-set
//! on the epoch); gateways learn it from server 0 and hold it under a lease.
//!
//! ```text
//!  admin API (admin) ─┐                                    ┌─> Volume on server 0 (commit point), then 1..S-1
//!  imca mount ────────┴─ ConfigUpdate::merge ─> change::admit ─> rollout ─┘       │ watch channel
//!                         (validate: the options table)                          v
//!  imca storage flags, SetVolumeConfig, volume.json ─> Volume (validate) ──> SMCache (layout, FenceRequests)
//!  gateway: lease (read server 0 every lease/2) ─> CMCache;  every few reads: rollout::repair + fence::Fencer
//! ```
//!
//! One module per idea:
//!
//! - [`config`]: the [`CacheConfig`] shape and its defaults;
//! - [`options`]: the options table (name, type, range, default,
//!   description, settable, rule) — the only place a rule is written;
//! - `validate.rs`: [`validate()`] runs the table over a config, for every
//!   entry point, against [`Limits`]; [`usable`] answers CMCache and SMCache;
//! - [`name`]: what a volume may be called (used verbatim in cache keys);
//! - [`update`], [`change`]: a change as a value, and the path it takes
//!   (validate, probe joining nodes);
//! - [`rollout`], [`lease`], [`fence`]: installing a config on every
//!   server, holding it on a gateway, fencing nodes that cannot confirm;
//!   `lease/upkeep.rs`: the lease's checks of every server, off its renewal;
//!   [`bypass`]: when and how long a gateway ran without its bank;
//! - [`probe`]: talking to a cache node outside the bank (version, stats,
//!   flush_all);
//! - `authority.rs`: [`Volume`], the storage server's copy.
//!
//! Nothing here knows HTTP, FUSE or the wire protocol: the gateway plugs the
//! storage servers in through [`rollout::VolumeServers`]; `admin` serves the
//! HTTP API over this crate. Task model: [`lease::start`] spawns two tasks
//! per gateway, the renewer and the upkeep; everything else runs on its
//! caller's task.

mod authority;
pub mod bypass;
pub mod change;
pub mod config;
mod error;
pub mod fence;
pub mod lease;
mod limits;
pub mod name;
pub mod options;
pub mod probe;
mod ratelog;
pub mod rollout;
pub mod update;
mod validate;

pub use authority::{acceptable, Refusal, Volume, VOLUME_FILE};
pub use config::{CacheConfig, Placement, DEFAULT_BANK_TIMEOUT_MS, DEFAULT_BLOCK_SIZE, DEFAULT_LEASE_MS, DEFAULT_VOLUME};
pub use error::{Error, Invalid};
pub use fence::FenceRequests;
pub use update::ConfigUpdate;
pub use limits::{Limits, DEFAULT_ITEM_LIMIT, DEFAULT_STRIPE_UNIT, DEFAULT_VALUE_OVERHEAD};
pub use validate::{usable, validate};
