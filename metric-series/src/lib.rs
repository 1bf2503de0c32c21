//! # metric-series — declaring metrics, for every crate's `metrics.rs`
//!
//! Every crate's `metrics.rs` makes its series here, so a series is one
//! call with its name, help and labels (and buckets), and
//! registering a crate's set in the daemon's registry is one call too.
//!
//! ```text
//!  metrics.rs:  let ops = series::counter_vec("imca_x_ops_total", "help", &["op", "result"]);
//!               series::register(registry, &[&ops, &latency])?;
//!  a request:   op_series.observe("read", "ok", took)   // count by result + latency by op
//! ```
//!
//! Names follow Prometheus' conventions (`imca_<component>_<thing>_<unit|total>`,
//! labels `op` and `result`); dashboards and tests scrape them by name, so a
//! series keeps its name, help and buckets once made. A name or label that
//! Prometheus refuses is a bug in the declaring code: the constructors panic
//! on it, like the `expect("valid metric")` they replace.

use prometheus::core::Collector;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use std::time::Duration;

pub fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

pub fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

pub fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid metric")
}

pub fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

pub fn histogram(name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets)).expect("valid metric")
}

pub fn histogram_vec(name: &str, help: &str, labels: &[&str], buckets: Vec<f64>) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels).expect("valid metric")
}

/// `count` buckets from `start`, each `factor` times the one before.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    prometheus::exponential_buckets(start, factor, count).expect("valid buckets")
}

/// A series a registry can hold (every prometheus metric type).
pub trait Series {
    fn boxed(&self) -> Box<dyn Collector>;
}

impl<C: Collector + Clone + 'static> Series for C {
    fn boxed(&self) -> Box<dyn Collector> {
        Box::new(self.clone())
    }
}

/// Registers every series of `all` in `registry`. The only error is a name
/// the registry holds already: a crate registered twice in one registry.
/// Those that may be (one translator per registry, but tests build several)
/// ignore it with `let _ =`; then the first set registered is the one shown.
pub fn register(registry: &Registry, all: &[&dyn Series]) -> prometheus::Result<()> {
    all.iter().try_for_each(|s| registry.register(s.boxed()))
}

/// An operation's count by result and its latency by op: what io-stats and
/// the protocol server keep per file operation.
#[derive(Clone, Debug)]
pub struct OpSeries {
    /// `…_ops_total{op,result}`
    pub ops: IntCounterVec,
    /// `…_op_duration_seconds{op}`
    pub duration: HistogramVec,
}

impl OpSeries {
    /// `ops` and `duration` are (name, help) pairs.
    pub fn new(ops: (&str, &str), duration: (&str, &str), buckets: Vec<f64>) -> OpSeries {
        OpSeries {
            ops: counter_vec(ops.0, ops.1, &["op", "result"]),
            duration: histogram_vec(duration.0, duration.1, &["op"], buckets),
        }
    }

    pub fn register(&self, registry: &Registry) -> prometheus::Result<()> {
        register(registry, &[&self.ops, &self.duration])
    }

    /// One operation done: counted under its result, its time observed.
    pub fn observe(&self, op: &str, result: &str, took: Duration) {
        self.duration.with_label_values(&[op]).observe(took.as_secs_f64());
        self.ops.with_label_values(&[op, result]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_series_register_once_and_render() {
        let r = Registry::new();
        let ops = OpSeries::new(("imca_t_ops_total", "ops"), ("imca_t_op_duration_seconds", "time"), exponential_buckets(1e-6, 4.0, 3));
        let up = gauge("imca_t_up", "up");
        ops.register(&r).unwrap();
        register(&r, &[&up]).unwrap();
        assert!(register(&r, &[&up]).is_err(), "a name registered twice");
        ops.observe("read", "ok", Duration::from_micros(2));
        up.set(1);
        let text = prometheus::TextEncoder::new().encode_to_string(&r.gather()).unwrap();
        assert!(text.contains("imca_t_ops_total{op=\"read\",result=\"ok\"} 1"), "{text}");
        assert!(text.contains("imca_t_op_duration_seconds_bucket{op=\"read\",le=\"0.000004\"} 1"), "{text}");
        assert!(text.contains("# HELP imca_t_up up\n# TYPE imca_t_up gauge\nimca_t_up 1"), "{text}");
    }
}
