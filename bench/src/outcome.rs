//! One benchmark's result as every output shows it: the configuration it
//! ran under (system and run parameters), and a table of numbers — printed
//! for people, written as JSON and CSV, and drawn (see [`crate::figure`]).

use crate::config::System;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// "B1" … "B5"
    pub bench: String,
    pub name: String,
    /// the user's name for this run ("imca-1node", "no-cache", a suite target)
    pub label: String,
    pub system: System,
    /// the run's own parameters: clients, sizes, records, cold or warm, …
    pub run: serde_json::Value,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<f64>>,
}

impl Outcome {
    /// Column `name` of `row` (NaN if there is no such column).
    pub fn get(&self, row: &[f64], name: &str) -> f64 {
        self.columns.iter().position(|c| c == name).and_then(|i| row.get(i).copied()).unwrap_or(f64::NAN)
    }

    /// The rows where column `name` equals `v`.
    pub fn rows_where<'a>(&'a self, name: &'a str, v: f64) -> impl Iterator<Item = &'a Vec<f64>> + 'a {
        self.rows.iter().filter(move |r| self.get(r, name) == v)
    }

    /// One line stating everything the numbers depend on.
    pub fn config_line(&self) -> String {
        let s = &self.system;
        let mut run = String::new();
        if let Some(m) = self.run.as_object() {
            for (k, v) in m {
                run += &format!(" {k}={}", v.to_string().trim_matches('"'));
            }
        }
        format!(
            "target={} fs={} block_size={} nodes={} placement={} transport={} storage_servers={}{run}",
            s.target.display(),
            s.fs_type,
            s.block_size,
            s.nodes,
            s.placement,
            s.transport,
            s.storage_servers
        )
    }

    /// The table people read.
    pub fn table(&self) -> String {
        let mut out = format!("{} {}  {}\n  {}\n", self.bench, self.name, self.label, self.config_line());
        let widths: Vec<usize> = self.columns.iter().map(|c| c.len().max(9)).collect();
        out += " ";
        for (c, w) in self.columns.iter().zip(&widths) {
            out += &format!(" {c:>w$}");
        }
        out += "\n";
        for row in &self.rows {
            out += " ";
            for (v, w) in row.iter().zip(&widths) {
                out += &format!(" {:>w$}", num(*v));
            }
            out += "\n";
        }
        out
    }

    /// CSV: a header, then one line per row (the configuration is in the JSON).
    pub fn csv(&self) -> String {
        let mut out = self.columns.join(",") + "\n";
        for row in &self.rows {
            out += &row.iter().map(|v| num(*v)).collect::<Vec<_>>().join(",");
            out += "\n";
        }
        out
    }

    /// The table as Markdown (for the suite's report).
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} |\n|{}\n", self.columns.join(" | "), "---|".repeat(self.columns.len()));
        for row in &self.rows {
            out += &format!("| {} |\n", row.iter().map(|v| num(*v)).collect::<Vec<_>>().join(" | "));
        }
        out
    }

    /// Write `<dir>/<stem>.json` and `.csv`; returns the paths.
    pub fn write(&self, dir: &Path, stem: &str) -> anyhow::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let json = dir.join(format!("{stem}.json"));
        std::fs::write(&json, serde_json::to_vec_pretty(self)?)?;
        let csv = dir.join(format!("{stem}.csv"));
        std::fs::write(&csv, self.csv())?;
        Ok(vec![json, csv])
    }
}

/// Integers as integers, others with enough digits to compare.
fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Outcome {
        Outcome {
            bench: "B2".into(),
            name: "latency".into(),
            label: "x".into(),
            system: System::default(),
            run: serde_json::json!({"records": 1024, "cold": false}),
            columns: vec!["record".into(), "read_mean_us".into()],
            rows: vec![vec![1.0, 12.25], vec![2.0, 130.0]],
        }
    }

    #[test]
    fn csv_and_table_and_lookup() {
        let o = sample();
        assert_eq!(o.csv(), "record,read_mean_us\n1,12.250\n2,130\n");
        let t = o.table();
        assert!(t.contains("records=1024") && t.contains("cold=false") && t.contains("read_mean_us"), "{t}");
        assert_eq!(o.get(&o.rows[1], "read_mean_us"), 130.0);
        assert!(o.get(&o.rows[1], "nope").is_nan());
        assert_eq!(o.rows_where("record", 2.0).count(), 1);
        assert_eq!(o.markdown(), "| record | read_mean_us |\n|---|---|\n| 1 | 12.250 |\n| 2 | 130 |\n");
    }

    #[test]
    fn json_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let files = sample().write(d.path(), "b2").unwrap();
        let back: Outcome = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(back.rows, sample().rows);
    }
}
