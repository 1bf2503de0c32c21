//! The FUSE side of the gateway: the kernel's requests become translator calls.

mod answer;
pub mod convert;
pub mod dirs;
pub mod fs;
pub mod inodes;

pub use fs::{CachePolicy, GatewayFs, MAX_REQUEST};
