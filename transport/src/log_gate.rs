//! Logging what peers can trigger at will (refused handshakes, say) at a
//! bounded rate: the first event logs, then at most one line per interval,
//! saying how many were held back meanwhile. An attacker's flood costs a
//! counter increment, not a disk full of log.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct LogGate {
    interval: Duration,
    /// ms since `epoch` of the last line let through (u64::MAX: never)
    last: AtomicU64,
    held: AtomicU64,
    epoch: OnceLock<Instant>,
}

impl LogGate {
    pub const fn new(interval: Duration) -> LogGate {
        LogGate { interval, last: AtomicU64::new(u64::MAX), held: AtomicU64::new(0), epoch: OnceLock::new() }
    }

    /// `Some(n)` when this event may be logged, `n` events having been
    /// held back since the last line; `None` to stay quiet.
    pub fn pass(&self) -> Option<u64> {
        let now = self.epoch.get_or_init(Instant::now).elapsed().as_millis() as u64;
        let last = self.last.load(Relaxed);
        let due = last == u64::MAX || now.saturating_sub(last) >= self.interval.as_millis() as u64;
        if due && self.last.compare_exchange(last, now, Relaxed, Relaxed).is_ok() {
            return Some(self.held.swap(0, Relaxed));
        }
        self.held.fetch_add(1, Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_passes_then_one_per_interval_with_the_count_held() {
        let g = LogGate::new(Duration::from_millis(50));
        assert_eq!(g.pass(), Some(0));
        assert_eq!(g.pass(), None);
        assert_eq!(g.pass(), None);
        std::thread::sleep(Duration::from_millis(60)); // the interval itself is what is tested
        assert_eq!(g.pass(), Some(2));
    }
}
