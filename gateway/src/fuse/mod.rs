//! The FUSE bridge: a kernel request becomes a call on the client graph's
//! top (the coherence translator), its answer a FUSE reply, and what the
//! coherence translator says the kernel must forget goes out through
//! fuser's notifier ([`Kernel`]).
//!
//! What may be answered without the graph (the memo's re-validations, a
//! small file's bytes written here, known-absent xattrs and names) is asked
//! of the coherence translator's synchronous API on the fuser thread; the
//! rest runs until it first waits (`first_poll`), then on the runtime.

mod answer;
pub mod convert;
pub mod dir_streams;
mod fallocate;
mod first_poll;
pub mod fs;
mod kernel_notifier;
mod listing;
mod open_file_handlers;
pub mod readers;
mod xattrs;

pub use coherence::Mode as KernelCacheMode;
pub use fs::{GatewayFs, MAX_REQUEST};
pub use kernel_notifier::Kernel;
