//! # testkit-procs — servers for tests, as child processes
//!
//! The tests that compare IMCa's cache node with Debian's memcached, and
//! the ones that run a bank over real nodes, start those nodes here:
//!
//! ```text
//!  free_port() ──> 127.0.0.1:<port>
//!  Memcached::start / with(flags)     Debian's memcached on a free port (tried again
//!  Memcached::cache_node(imca, flags)  `imca cache-node`    when another test took the port)
//!  Memcached::on(port, flags)         memcached on a port a test kept (a restart)
//!  MemcachedUnix::start(path, flags)  memcached on a UNIX socket
//! ```
//!
//! Every process is killed when its handle drops. Start-up is waited for by
//! polling the port, never by sleeping a fixed time. The crate depends on no
//! other crate of the workspace, so every crate's tests may use it
//! (`testkit`, the translators' kit, depends on cache-node and cache-bank).

mod memcached;
mod ports;

pub use memcached::{need, Memcached, MemcachedUnix, Program};
pub use ports::free_port;
