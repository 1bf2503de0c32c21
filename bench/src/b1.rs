//! B1 (stat): untimed, create N files; timed, every client stats every file.
//! Reported: the slowest client's total time (the dissertation's metric) and
//! the aggregate stat rate.

use crate::util::{drop_caches, timed_clients};
use crate::Common;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// Files to create (the dissertation used 262,144; --quick uses 2,048).
    #[arg(long)]
    pub files: Option<usize>,
    /// Timed passes over the files (each client stats every file this many times).
    #[arg(long, default_value_t = 1)]
    pub passes: usize,
    /// Reuse the files of an earlier run in the same directory.
    #[arg(long)]
    pub keep: bool,
}

pub fn run(a: &Args) -> anyhow::Result<String> {
    let c = &a.common;
    let n = a.files.unwrap_or(if c.quick { 2048 } else { 262_144 });
    let dir = c.dir.join("imca-bench-b1");
    std::fs::create_dir_all(&dir)?;
    let names: Arc<Vec<PathBuf>> = Arc::new((0..n).map(|i| dir.join(format!("f{i:07}"))).collect());
    let t = std::time::Instant::now();
    for p in names.iter() {
        if !(a.keep && p.exists()) {
            std::fs::File::create(p)?;
        }
    }
    let create_s = t.elapsed().as_secs_f64();
    if c.cold {
        drop_caches()?;
    }
    let passes = a.passes.max(1);
    let ns = names.clone();
    let times = timed_clients(c.clients.max(1), move |client| {
        for pass in 0..passes {
            // clients start at different files so they do not march in lockstep
            let start = (client * 7919 + pass * 104_729) % ns.len().max(1);
            for i in 0..ns.len() {
                std::fs::metadata(&ns[(start + i) % ns.len()])?;
            }
        }
        Ok(())
    })?;
    let max = times.iter().map(|d| d.as_secs_f64()).fold(0.0, f64::max);
    let stats = (n * passes * c.clients.max(1)) as f64;
    let rate = stats / max;
    let out = serde_json::json!({
        "bench": "B1 stat",
        "label": c.label,
        "dir": c.dir,
        "files": n,
        "clients": c.clients.max(1),
        "passes": passes,
        "cold": c.cold,
        "create_seconds": create_s,
        "max_client_seconds": max,
        "per_client_seconds": times.iter().map(|d| d.as_secs_f64()).collect::<Vec<_>>(),
        "stats_per_second": rate,
        "mean_stat_us": max / (n * passes) as f64 * 1e6,
    });
    if c.json {
        return Ok(out.to_string());
    }
    Ok(format!(
        "B1 stat  {}  files={n} clients={} passes={passes} cold={}\n  slowest client: {max:.3} s   aggregate: {rate:.0} stat/s   per stat (slowest client): {:.1} µs",
        c.label,
        c.clients.max(1),
        c.cold,
        max / (n * passes) as f64 * 1e6
    ))
}
