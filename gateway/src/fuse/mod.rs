//! The FUSE side of the gateway: the kernel's requests become translator calls.

mod ahead;
mod answer;
mod contents;
mod first_poll;
mod append;
pub mod convert;
pub mod dirs;
pub mod fs;
mod here;
pub mod holds;
pub mod inodes;
pub mod kernel_cache;
pub mod locks;
mod reclaim;
mod listing;
mod memo;
mod names;
mod open_files;
mod opens;
pub mod readers;
mod xattrs;

pub use fs::{GatewayFs, MAX_REQUEST};
pub use kernel_cache::{KernelCache, Mode as KernelCacheMode};
