//! Debian's memcached for the differential tests: on a free loopback port
//! or a UNIX socket, killed on drop (the launcher is `testkit-procs`, shared
//! with the bank's and the whole system's tests).
#![allow(unused_imports)]

pub use testkit_procs::{need, Memcached, MemcachedUnix};
