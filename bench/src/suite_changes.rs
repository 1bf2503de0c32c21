//! The change benchmark inside `imca bench suite`: one tree for every
//! target, `--rounds` runs per target alternated between the targets
//! (round 1 on each, then round 2 …, so a drift in the machine's load hits
//! all alike), the rounds of a target merged into one result, and the
//! report's table of every target's rates beside the baseline's — the
//! table of issue 34.

use crate::changes::{self, PHASES};
use crate::config::System;
use crate::outcome::{Outcome, RowNames};
use crate::tarball::Tarball;
use crate::Common;
use std::fmt::Write as _;

/// What every run of the change benchmark in one suite shares.
pub struct Changes {
    args: changes::Args,
    tree: Tarball,
    pub rounds: usize,
}

impl Changes {
    /// Make (or name) the tree now, before the first target is measured.
    /// `args`: the sizes and tree every run shares (its `common` is replaced per target).
    pub fn new(args: changes::Args, rounds: usize) -> anyhow::Result<Changes> {
        let tree = args.tarball()?;
        Ok(Changes { args, tree, rounds: rounds.max(1) })
    }

    /// Round `round` on the target `common` names (one client through its first mount).
    pub fn round(&self, common: &Common, system: &System, round: usize) -> anyhow::Result<Outcome> {
        if !common.quiet {
            eprintln!("== changes, round {round}/{}: target {}", self.rounds, common.label);
        }
        let common = Common { clients: Vec::new(), other_dirs: Vec::new(), ..common.clone() };
        changes::run(&changes::Args { common, ..self.args.clone() }, system, &self.tree)
    }
}

/// A target's rounds as one result: one round is itself; several get a
/// `round` column (1, 2, …) before the others, every row kept, and the
/// tree counts as identical only if it was in every round.
pub fn merge(mut rounds: Vec<Outcome>) -> Outcome {
    if rounds.len() <= 1 {
        return rounds.pop().expect("at least one round");
    }
    let mut o = rounds[0].clone();
    o.columns.insert(0, "round".into());
    o.rows.clear();
    let mut names = Vec::new();
    let mut differences = Vec::new();
    for (r, x) in rounds.iter().enumerate() {
        for (i, row) in x.rows.iter().enumerate() {
            o.rows.push(std::iter::once((r + 1) as f64).chain(row.iter().copied()).collect());
            names.push(x.row_name(i).to_string());
        }
        for key in ["identical", "mtimes_kept", "modes_kept"] {
            if x.run[key] == false {
                o.run[key] = false.into();
            }
        }
        if let Some(d) = x.run["differences"].as_array() {
            differences.extend(d.iter().map(|l| format!("round {}: {}", r + 1, l.as_str().unwrap_or_default())));
        }
    }
    o.run["rounds"] = rounds.len().into();
    if !differences.is_empty() {
        o.run["differences"] = differences.into();
    }
    o.names = Some(RowNames { column: "phase".into(), rows: names });
    o
}

/// Every target's rate per phase (the median of its rounds) and its ratio
/// to the baseline's, a row per target: the report's summary.
pub fn across(results: &[(&str, &Outcome)], baseline: &str, ratio: fn(f64) -> String) -> String {
    let mut m = format!("| ops/s (× {baseline}) | {} |\n|---|{}\n", PHASES.join(" | "), "---|".repeat(PHASES.len()));
    let base = results.iter().find(|(n, _)| *n == baseline).map(|(_, o)| changes::rates(o));
    for (name, o) in results {
        let cells: Vec<String> = changes::rates(o)
            .iter()
            .enumerate()
            .map(|(i, rate)| match (rate, base.as_ref().and_then(|b| b[i])) {
                (Some(r), Some(b)) if b > 0.0 => format!("{r:.0} ({}×)", ratio(r / b)),
                (Some(r), _) => format!("{r:.0}"),
                (None, _) => "—".into(),
            })
            .collect();
        let _ = writeln!(m, "| {name} | {} |", cells.join(" | "));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(create: f64, identical: bool) -> Outcome {
        let mut o = Outcome {
            bench: "changes".into(),
            name: String::new(),
            label: String::new(),
            system: System::default(),
            run: serde_json::json!({"identical": identical, "mtimes_kept": true, "modes_kept": true}),
            columns: ["count", "seconds", "per_s", "us_per_op"].map(String::from).to_vec(),
            rows: vec![vec![100.0, 100.0 / create, create, 1e6 / create], vec![10.0, 1.0, 10.0, 1e5]],
            names: Some(RowNames { column: "phase".into(), rows: vec!["create+write".into(), "untar".into()] }),
        };
        if !identical {
            o.run["differences"] = serde_json::json!(["a: Size differs"]);
            o.rows.pop();
            o.names.as_mut().unwrap().rows.pop();
        }
        o
    }

    #[test]
    fn one_round_is_itself_and_several_are_numbered() {
        let one = merge(vec![round(50.0, true)]);
        assert_eq!(one.columns[0], "count");
        let m = merge(vec![round(50.0, true), round(70.0, false), round(60.0, true)]);
        assert_eq!(m.columns[0], "round");
        assert_eq!(m.rows.len(), 5);
        assert_eq!(m.rows.iter().map(|r| r[0]).collect::<Vec<_>>(), [1.0, 1.0, 2.0, 3.0, 3.0]);
        assert_eq!(m.row_name(2), "create+write");
        assert_eq!(m.run["rounds"], 3);
        assert_eq!(m.run["identical"], false, "one differing round fails them all");
        assert_eq!(m.run["differences"][0], "round 2: a: Size differs");
        assert_eq!(changes::rates(&m)[0], Some(60.0), "the median of the rounds");
        assert_eq!(changes::rates(&m)[5], Some(10.0));
        assert!(changes::verdict(&m).is_err());
    }

    #[test]
    fn the_suite_and_the_command_take_the_change_flags() {
        let argv = ["suite", "--target", "a=/x", "--out", "/o", "--only", "changes", "--rounds", "3", "--entries", "50"];
        let crate::Which::Suite(s) = crate::parse(&argv).unwrap().which else { panic!("suite") };
        assert_eq!((s.only, s.rounds, s.entries, s.change_files), (vec!["changes".to_string()], 3, Some(50), None));
        let crate::Which::Changes(c) = crate::parse(&["changes", "--dir", "/x", "--quick"]).unwrap().which else {
            panic!("changes")
        };
        assert_eq!((c.files(), c.entries()), (300, 800));
        let crate::Which::Changes(c) = crate::parse(&["changes", "--dir", "/x", "--files", "10"]).unwrap().which else {
            panic!("changes")
        };
        assert_eq!((c.files(), c.entries()), (10, 4000));
    }

    #[test]
    fn the_summary_puts_every_target_beside_the_baseline() {
        let (local, imca) = (round(200.0, true), round(50.0, true));
        let t = across(&[("local", &local), ("imca", &imca)], "local", |x| format!("{x:.2}"));
        assert!(t.starts_with("| ops/s (× local) | create+write | rename |"), "{t}");
        assert!(t.contains("| local | 200 (1.00×) | — |"), "{t}");
        assert!(t.contains("| imca | 50 (0.25×) | — |"), "{t}");
    }
}
