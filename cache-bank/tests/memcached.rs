//! A real Debian memcached on a free loopback port, for tests (the launcher
//! is `testkit-procs`, shared with the cache node's and the whole system's
//! tests).
#![allow(unused_imports)]

pub use testkit_procs::{Memcached, MemcachedUnix};
