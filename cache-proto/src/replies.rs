//! The error lines memcached 1.6 answers, word for word: the text and meta
//! parsers produce them, the cache node sends them. They are here and only
//! here (re-exported by [`crate::text`]).

pub const ERROR: &str = "ERROR";
pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
pub const BAD_CHUNK: &str = "CLIENT_ERROR bad data chunk";
pub const BAD_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";
pub const BAD_DELTA: &str = "CLIENT_ERROR invalid numeric delta argument";
pub const TOO_LARGE: &str = "SERVER_ERROR object too large for cache";
pub const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
/// A store refused under `-M` (no evictions) for want of memory.
pub const NO_MEMORY: &str = "SERVER_ERROR out of memory storing object";
pub const DELETE_USAGE: &str = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
