//! Counters behind `stats` and `/metrics`.
//!
//! Sessions count into a plain local array and add it to the shared atomics
//! once per batch of requests, so the hot path touches no shared cache line
//! per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

macro_rules! counters {
    ($($v:ident => $name:literal),* $(,)?) => {
        /// One counter; `name()` is memcached's stat name (or ours, `imca_*`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum C { $($v),* }
        pub const N: usize = [$(C::$v),*].len();
        impl C {
            pub const ALL: [C; N] = [$(C::$v),*];
            pub fn name(self) -> &'static str { match self { $(C::$v => $name),* } }
        }
    };
}

counters! {
    CmdGet => "cmd_get", CmdSet => "cmd_set", CmdFlush => "cmd_flush", CmdTouch => "cmd_touch",
    CmdMeta => "cmd_meta", GetHits => "get_hits", GetMisses => "get_misses", GetExpired => "get_expired",
    GetFlushed => "get_flushed", DeleteMisses => "delete_misses", DeleteHits => "delete_hits",
    IncrMisses => "incr_misses", IncrHits => "incr_hits", DecrMisses => "decr_misses", DecrHits => "decr_hits",
    CasMisses => "cas_misses", CasHits => "cas_hits", CasBadval => "cas_badval", TouchHits => "touch_hits",
    TouchMisses => "touch_misses", StoreTooLarge => "store_too_large", StoreNoMemory => "store_no_memory",
    // memcached counts logins (-Y) that name a user and password, and the failed ones
    AuthCmds => "auth_cmds", AuthErrors => "auth_errors",
    BytesRead => "bytes_read", BytesWritten => "bytes_written",
    // ours (not in memcached's `stats`): results of storage commands and protocol errors
    Stored => "imca_stored", NotStored => "imca_not_stored", Exists => "imca_exists", NotFound => "imca_not_found",
    ClientErrors => "imca_client_errors",
}

/// Session-local counts, flushed into [`Stats`].
#[derive(Default)]
pub struct Counters([u64; N]);

impl Counters {
    #[inline]
    pub fn add(&mut self, c: C, n: u64) {
        self.0[c as usize] += n;
    }
    #[inline]
    pub fn inc(&mut self, c: C) {
        self.0[c as usize] += 1;
    }
}

pub struct Stats {
    c: [AtomicU64; N],
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub started: Instant,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            c: std::array::from_fn(|_| AtomicU64::new(0)),
            curr_connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            started: Instant::now(),
        }
    }
}

impl Stats {
    pub fn flush(&self, local: &mut Counters) {
        for (i, v) in local.0.iter_mut().enumerate() {
            if *v != 0 {
                self.c[i].fetch_add(*v, Ordering::Relaxed);
                *v = 0;
            }
        }
    }

    pub fn get(&self, c: C) -> u64 {
        self.c[c as usize].load(Ordering::Relaxed)
    }

    /// `stats reset`
    pub fn reset(&self) {
        for a in &self.c {
            a.store(0, Ordering::Relaxed);
        }
        self.total_connections.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
    }
}
