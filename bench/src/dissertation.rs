//! The dissertation's results (chapter 7.4) and issue 15's goals, as data,
//! and how to compute the same figure from our outcomes — so the suite's
//! report puts theirs and ours side by side.
//!
//! Source: the dissertation's evaluation as summarised in the project's
//! benchmark plan (`../shared/BENCHMARKS.md`, copied into
//! docs/benchmark-plan.md); goals from issue 15.

use crate::outcome::Outcome;

pub const SOURCE: &str = "the dissertation, ch. 7.4 (as summarised in docs/benchmark-plan.md); goals: issue 15";

/// How "ours" is computed from a target's outcome and the baseline's.
#[derive(Clone, Copy, Debug)]
pub enum Metric {
    /// B1: slowest client's time at the largest client count both ran.
    SlowestClientAtMostClients,
    /// B2: mean read latency of the smallest record.
    ReadOfSmallestRecord,
    /// B3: mean read latency of the smallest record at the largest client count.
    ReadOfSmallestRecordAtMostClients,
    /// B4: best aggregate MB/s over the reader counts (a speed-up: higher is better).
    BestThroughput,
}

pub struct Claim {
    pub bench: &'static str,
    /// what was compared, in the dissertation's setting
    pub setting: &'static str,
    /// their result as a ratio with cache ÷ without (B4: ×)
    pub ratio: f64,
    pub text: &'static str,
    /// issue 15's goal
    pub goal: &'static str,
    pub metric: Metric,
}

pub const CLAIMS: &[Claim] = &[
    Claim {
        bench: "B1",
        setting: "1 cache node vs no cache, 64 clients, slowest client's time",
        ratio: 0.18,
        text: "−82% time (6 nodes: −86% vs Lustre)",
        goal: "cold, 1 node vs none: ≤ 0.18",
        metric: Metric::SlowestClientAtMostClients,
    },
    Claim {
        bench: "B2",
        setting: "1-byte read latency vs no cache, 2 KiB blocks",
        ratio: 0.55,
        text: "−59% (256 B blocks), −45% (2 KiB), −31% (8 KiB); beyond 8 KiB records 256 B blocks lose",
        goal: "1-byte read, 2 KiB blocks: ≤ 0.5",
        metric: Metric::ReadOfSmallestRecord,
    },
    Claim {
        bench: "B3",
        setting: "1-byte read latency, 32 clients, 4 nodes vs no cache",
        ratio: 0.18,
        text: "−82% read latency at 1 B",
        goal: "1-byte read, 4 nodes vs none: ≤ 0.18",
        metric: Metric::ReadOfSmallestRecordAtMostClients,
    },
    Claim {
        bench: "B4",
        setting: "read throughput of a 1 GiB file, 4 nodes vs no cache",
        ratio: 2.08,
        text: "868 MB/s vs 417 MB/s (2.08×)",
        goal: "4 nodes vs none: ≥ 2.1×",
        metric: Metric::BestThroughput,
    },
    Claim {
        bench: "B5",
        setting: "shared-file read latency, 32 clients, 1 node vs no cache",
        ratio: 0.55,
        text: "−45%",
        goal: "1 node vs none: ≤ 0.55",
        metric: Metric::ReadOfSmallestRecordAtMostClients,
    },
];

/// The claim's figure for `ours` against `base` (same benchmark), with the
/// point it was taken at; None when they share no such point.
pub fn ours(metric: Metric, ours: &Outcome, base: &Outcome) -> Option<(f64, String)> {
    let max_common = |col: &str| -> Option<f64> {
        let a: Vec<f64> = ours.rows.iter().map(|r| ours.get(r, col)).collect();
        base.rows.iter().map(|r| base.get(r, col)).filter(|v| a.contains(v)).max_by(f64::total_cmp)
    };
    let min_record = || ours.rows.iter().map(|r| ours.get(r, "record")).min_by(f64::total_cmp);
    let value = |o: &Outcome, conds: &[(&str, f64)], col: &str| -> Option<f64> {
        o.rows.iter().find(|r| conds.iter().all(|(c, v)| o.get(r, c) == *v)).map(|r| o.get(r, col))
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    };
    match metric {
        Metric::SlowestClientAtMostClients => {
            let k = max_common("clients")?;
            let c = [("clients", k)];
            Some((ratio(value(ours, &c, "max_client_s"), value(base, &c, "max_client_s"))?, format!("{k} clients")))
        }
        Metric::ReadOfSmallestRecord => {
            let r = min_record()?;
            let c = [("record", r)];
            Some((ratio(value(ours, &c, "read_mean_us"), value(base, &c, "read_mean_us"))?, format!("{r} B records")))
        }
        Metric::ReadOfSmallestRecordAtMostClients => {
            let (k, r) = (max_common("clients")?, min_record()?);
            let c = [("clients", k), ("record", r)];
            Some((
                ratio(value(ours, &c, "read_mean_us"), value(base, &c, "read_mean_us"))?,
                format!("{k} clients, {r} B records"),
            ))
        }
        Metric::BestThroughput => {
            let best = |o: &Outcome| o.rows.iter().map(|r| o.get(r, "mb_per_s")).max_by(f64::total_cmp);
            Some((ratio(best(ours), best(base))?, "best over reader counts".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::System;

    fn o(columns: &[&str], rows: Vec<Vec<f64>>) -> Outcome {
        Outcome {
            bench: "B".into(),
            name: String::new(),
            label: String::new(),
            system: System::default(),
            run: serde_json::Value::Null,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
            names: None,
        }
    }

    #[test]
    fn ratios_at_the_claims_point() {
        let cols = ["clients", "record", "read_mean_us"];
        let base = o(&cols, vec![vec![1.0, 1.0, 100.0], vec![2.0, 1.0, 200.0], vec![2.0, 4.0, 300.0]]);
        let ours_ = o(&cols, vec![vec![1.0, 1.0, 50.0], vec![2.0, 1.0, 40.0], vec![2.0, 4.0, 30.0], vec![4.0, 1.0, 1.0]]);
        let (r, at) = ours(Metric::ReadOfSmallestRecordAtMostClients, &ours_, &base).unwrap();
        assert_eq!(r, 0.2, "at 2 clients (4 is not in the baseline), 1 B");
        assert!(at.contains("2 clients"));
        let t = ["threads", "mb_per_s"];
        let (x, _) = ours(Metric::BestThroughput, &o(&t, vec![vec![1.0, 300.0], vec![2.0, 900.0]]), &o(&t, vec![vec![1.0, 450.0]]))
            .unwrap();
        assert_eq!(x, 2.0);
        assert!(ours(Metric::SlowestClientAtMostClients, &ours_, &o(&["clients"], vec![])).is_none());
    }

    #[test]
    fn every_benchmark_has_a_claim() {
        for b in ["B1", "B2", "B3", "B4", "B5"] {
            assert!(CLAIMS.iter().any(|c| c.bench == b), "{b}");
        }
    }
}
