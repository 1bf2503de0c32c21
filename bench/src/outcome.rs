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
    /// A name per row, for tables whose rows are not points of a sweep (the
    /// change benchmark's phases): shown as a first column. Absent in B1–B5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub names: Option<RowNames>,
}

/// The first column of a table whose rows are named: its header, and one name per row.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowNames {
    pub column: String,
    pub rows: Vec<String>,
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
        let name_width = self.names.as_ref().map(|n| n.rows.iter().chain([&n.column]).map(|s| s.len()).max().unwrap_or(0));
        out += " ";
        if let (Some(n), Some(w)) = (&self.names, name_width) {
            out += &format!(" {:<w$}", n.column);
        }
        for (c, w) in self.columns.iter().zip(&widths) {
            out += &format!(" {c:>w$}");
        }
        out += "\n";
        for (i, row) in self.rows.iter().enumerate() {
            out += " ";
            if let Some(w) = name_width {
                out += &format!(" {:<w$}", self.row_name(i));
            }
            for (v, w) in row.iter().zip(&widths) {
                out += &format!(" {:>w$}", num(*v));
            }
            out += "\n";
        }
        out
    }

    /// The name of row `i` ("" when rows are not named).
    pub fn row_name(&self, i: usize) -> &str {
        self.names.as_ref().and_then(|n| n.rows.get(i)).map(String::as_str).unwrap_or("")
    }

    /// The header cells, the names' column first when rows are named.
    fn header(&self) -> Vec<&str> {
        self.names.iter().map(|n| n.column.as_str()).chain(self.columns.iter().map(String::as_str)).collect()
    }

    /// Row `i`'s cells as text, its name first when rows are named.
    fn cells(&self, i: usize) -> Vec<String> {
        let name = self.names.as_ref().map(|_| self.row_name(i).to_string());
        name.into_iter().chain(self.rows[i].iter().map(|v| num(*v))).collect()
    }

    /// CSV: a header, then one line per row (the configuration is in the JSON).
    pub fn csv(&self) -> String {
        let mut out = self.header().join(",") + "\n";
        for i in 0..self.rows.len() {
            out += &self.cells(i).join(",");
            out += "\n";
        }
        out
    }

    /// The table as Markdown (for the suite's report).
    pub fn markdown(&self) -> String {
        let header = self.header();
        let mut out = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
        for i in 0..self.rows.len() {
            out += &format!("| {} |\n", self.cells(i).join(" | "));
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
            names: None,
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
    fn named_rows_lead_every_table() {
        let mut o = sample();
        o.names = Some(RowNames { column: "phase".into(), rows: vec!["create".into(), "rm -rf".into()] });
        assert_eq!(o.csv(), "phase,record,read_mean_us\ncreate,1,12.250\nrm -rf,2,130\n");
        assert_eq!(o.markdown(), "| phase | record | read_mean_us |\n|---|---|---|\n| create | 1 | 12.250 |\n| rm -rf | 2 | 130 |\n");
        let t = o.table();
        assert!(t.contains("\n  phase     record") && t.contains("\n  rm -rf         2"), "{t}");
        assert_eq!(o.row_name(1), "rm -rf");
        let back: Outcome = serde_json::from_slice(&serde_json::to_vec(&o).unwrap()).unwrap();
        assert_eq!(back.names, o.names);
        let plain = serde_json::to_value(sample()).unwrap();
        assert!(plain.get("names").is_none(), "B1–B5 results stay as they were");
    }

    #[test]
    fn json_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let files = sample().write(d.path(), "b2").unwrap();
        let back: Outcome = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
        assert_eq!(back.rows, sample().rows);
    }
}
