//! Server time the way memcached keeps it: seconds since (just before) start,
//! so expiry times fit in a u32. `advance` lets tests skip ahead without
//! sleeping.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

fn coarse_secs() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    #[allow(clippy::unnecessary_cast)]
    let s = ts.tv_sec as i64;
    s
}

/// memcached's `ITEM_UPDATE_INTERVAL`: seconds between two LRU bumps of one item.
pub const UPDATE_INTERVAL: u32 = 60;

/// Server time at start: memcached's `ITEM_UPDATE_INTERVAL + 2`.
const START: i64 = UPDATE_INTERVAL as i64 + 2;

/// memcached's `REALTIME_MAXDELTA`: larger exptimes are absolute unix times.
pub const MAX_DELTA: i64 = 60 * 60 * 24 * 30;

pub struct Clock {
    /// CLOCK_MONOTONIC_COARSE seconds at start (cheap to read on every request)
    start: i64,
    /// unix time corresponding to server time 0
    process_started: i64,
    offset: AtomicU32,
}

impl Default for Clock {
    fn default() -> Self {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        // Like memcached (`process_started = time(0) - ITEM_UPDATE_INTERVAL
        // - 2`): "1" is in the past, and server times (a `watch` ttl of an
        // already expired item) read as memcached's.
        Clock { start: coarse_secs(), process_started: unix - START, offset: AtomicU32::new(0) }
    }
}

impl Clock {
    /// Current server time in seconds.
    pub fn now(&self) -> u32 {
        (coarse_secs() - self.start) as u32 + START as u32 + self.offset.load(Ordering::Relaxed)
    }

    pub fn unix_now(&self) -> i64 {
        self.process_started + i64::from(self.now())
    }

    pub fn advance(&self, secs: u32) {
        self.offset.fetch_add(secs, Ordering::Relaxed);
    }

    /// memcached's `realtime()`: a client exptime to server time
    /// (0 = never; negative = already expired; > 30 days = unix time).
    pub fn realtime(&self, exptime: i32) -> u32 {
        let e = i64::from(exptime);
        if e == 0 {
            return 0;
        }
        let e = if e < 0 { MAX_DELTA + 1 } else { e };
        if e > MAX_DELTA {
            if e <= self.process_started {
                1
            } else {
                (e - self.process_started).min(u32::MAX as i64) as u32
            }
        } else {
            (e + i64::from(self.now())) as u32
        }
    }
}
