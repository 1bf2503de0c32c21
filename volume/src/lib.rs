//! # volume — the volume's control plane
//!
//! A volume's cache configuration (cache-node pool, block size, placement,
//! epoch, lease) and who keeps it. Every storage server holds the config in
//! an [`Volume`] authority (persisted in `EXPORT/.imca/volume.json`, changed
//! only by compare-and-set on the epoch); gateways learn it from any storage
//! reply and hold it under a lease.
//!
//! ```text
//!  imca ctl / admin API ──SetVolumeConfig──> protocol-server ──> Volume (server 0 first, then the rest)
//!                                                                  │ watch channel
//!                                                                  v
//!                                                     SMCache (bank layout, fences)
//! ```

mod authority;

pub use authority::{validate, Volume, VOLUME_FILE};
pub use xlator::volume::*;
