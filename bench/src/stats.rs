//! Summary statistics of per-operation latencies (or per-client times):
//! what every table row and figure point is made of.
//!
//! Percentiles are nearest-rank on the sorted samples (no interpolation: a
//! p99 is a latency some operation really had). The standard deviation is
//! the population's (all samples of the phase, not an estimate from a
//! sample of them).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summary of `samples` (any unit; the result is in the same unit). An
    /// empty slice gives all zeros with n = 0.
    pub fn of(samples: &[f64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        Summary { n, mean, p50: rank(&s, 0.50), p99: rank(&s, 0.99), stddev: var.sqrt(), min: s[0], max: s[n - 1] }
    }

    /// Summary of nanosecond samples, in microseconds.
    pub fn of_ns_as_us(ns: &[u64]) -> Summary {
        Summary::of(&ns.iter().map(|&x| x as f64 / 1e3).collect::<Vec<_>>())
    }
}

/// Nearest-rank percentile of sorted, non-empty `s`: the smallest sample
/// with at least `q` of the samples at or below it.
fn rank(s: &[f64], q: f64) -> f64 {
    let idx = (q * s.len() as f64).ceil() as usize;
    s[idx.clamp(1, s.len()) - 1]
}

/// The mean of per-client means: the dissertation's B3/B5 figure, which
/// weighs every client alike however many operations it did.
pub fn mean_of_means(per_client: &[Summary]) -> f64 {
    let used: Vec<f64> = per_client.iter().filter(|s| s.n > 0).map(|s| s.mean).collect();
    if used.is_empty() {
        0.0
    } else {
        used.iter().sum::<f64>() / used.len() as f64
    }
}

/// One phase of a latency benchmark, from every client's per-operation
/// nanoseconds: [mean of per-client means, p50, p99, stddev] in µs, the
/// percentiles and spread over all operations of all clients. Clients that
/// did nothing in the phase (B5's readers during the write) are left out.
pub fn latency_us(per_client: &[&[u64]]) -> [f64; 4] {
    let means: Vec<Summary> = per_client.iter().map(|ns| Summary::of_ns_as_us(ns)).collect();
    let all: Vec<u64> = per_client.iter().flat_map(|ns| ns.iter().copied()).collect();
    let pooled = Summary::of_ns_as_us(&all);
    [mean_of_means(&means), pooled.p50, pooled.p99, pooled.stddev]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_of_a_phase() {
        let a = [1_000u64, 1_000, 1_000, 1_000];
        let b = [3_000u64];
        let [mean, p50, p99, sd] = latency_us(&[&a, &b, &[]]);
        assert_eq!(mean, 2.0, "each client counts once");
        assert_eq!((p50, p99), (1.0, 3.0));
        assert!((sd - 0.8).abs() < 1e-9, "{sd}"); // pooled: mean 1.4, var 0.64
    }

    #[test]
    fn one_to_hundred() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v);
        assert_eq!(s.n, 100);
        assert_eq!(s.mean, 50.5);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        // population stddev of 1..=100 is sqrt((100^2 - 1) / 12)
        assert!((s.stddev - (9999.0f64 / 12.0).sqrt()).abs() < 1e-9, "{}", s.stddev);
    }

    #[test]
    fn order_does_not_matter_and_outliers_reach_p99_only_when_frequent() {
        let mut v = vec![10.0; 99];
        v.push(1000.0);
        v.reverse();
        let s = Summary::of(&v);
        assert_eq!(s.p50, 10.0);
        assert_eq!(s.p99, 10.0, "one outlier in 100 is above the 99th percentile");
        assert_eq!(s.max, 1000.0);
        assert!((s.mean - 19.9).abs() < 1e-9);
        v.push(1000.0);
        assert_eq!(Summary::of(&v).p99, 1000.0, "two in 101 are not");
    }

    #[test]
    fn single_sample_and_empty() {
        let s = Summary::of(&[7.0]);
        assert_eq!((s.mean, s.p50, s.p99, s.stddev), (7.0, 7.0, 7.0, 0.0));
        let e = Summary::of(&[]);
        assert_eq!((e.n, e.mean), (0, 0.0));
    }

    #[test]
    fn constant_samples_have_no_spread() {
        let s = Summary::of(&[3.0, 3.0, 3.0]);
        assert_eq!(s.stddev, 0.0);
        assert_eq!(s.p99, 3.0);
    }

    #[test]
    fn nanoseconds_become_microseconds() {
        let s = Summary::of_ns_as_us(&[1_000, 3_000]);
        assert_eq!((s.mean, s.min, s.max), (2.0, 1.0, 3.0));
    }

    #[test]
    fn mean_of_means_weighs_clients_alike_and_skips_idle_ones() {
        let a = Summary::of(&[1.0; 1000]);
        let b = Summary::of(&[3.0]);
        assert_eq!(mean_of_means(&[a, b, Summary::default()]), 2.0);
        assert_eq!(mean_of_means(&[]), 0.0);
    }
}
