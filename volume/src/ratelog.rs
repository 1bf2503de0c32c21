//! A warning that anyone who can reach a storage server could repeat as
//! fast as they can send (a refused SetVolumeConfig): logged at most once
//! per period, with how many were left out since, so the log says it keeps
//! happening without turning into the flood.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) struct RateLimited {
    period: Duration,
    /// when the last line went out, and how many were held back since
    state: Mutex<(Option<Instant>, u64)>,
}

impl RateLimited {
    pub(crate) const fn new(period: Duration) -> RateLimited {
        RateLimited { period, state: Mutex::new((None, 0)) }
    }

    /// `Some(held back since the last line)` if a line may go out now.
    pub(crate) fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut g = self.state.lock().unwrap();
        match g.0 {
            Some(last) if now.duration_since(last) < self.period => {
                g.1 += 1;
                None
            }
            _ => {
                let held = std::mem::take(&mut g.1);
                g.0 = Some(now);
                Some(held)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_counting_the_rest() {
        let r = RateLimited::new(Duration::from_secs(10));
        let t = Instant::now();
        assert_eq!(r.allow_at(t), Some(0));
        for i in 1..=1000 {
            assert_eq!(r.allow_at(t + Duration::from_millis(i)), None);
        }
        assert_eq!(r.allow_at(t + Duration::from_secs(10)), Some(1000));
        assert_eq!(r.allow_at(t + Duration::from_secs(11)), None);
    }
}
