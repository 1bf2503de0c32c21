//! Support for the coherence tests: bank nodes as real processes (Debian
//! memcached or `imca cache-node`) that can be killed, restarted and frozen,
//! and an in-process pipeline (CMCache -> stripe -> SMCache -> posix) with
//! any number of gateways over the same storage servers and bank.
#![allow(dead_code)]

pub mod bank;
pub mod http;
pub mod inproc;
