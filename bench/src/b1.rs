//! B1 (stat): untimed, create N files; timed, every client process stats
//! every file. Reported per client count: the slowest client's total time
//! (the dissertation's metric), the spread over clients, and the aggregate
//! stat rate.

use crate::client::{stat_name, Job, Span};
use crate::config::System;
use crate::outcome::Outcome;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::stats::Summary;
use crate::util::maybe_drop;
use crate::Common;

pub const ABOUT: &str = "B1 (stat), the dissertation's metadata benchmark.

Untimed: create N files in DIR/imca-bench-b1 (N = 262,144; --quick: 2,048;
removed at the end, and first if an earlier run left them, unless --keep).
Timed: K client processes, released together by a barrier, each stat every
file (--passes times). Reported per K of the --clients sweep (default
1,2,4,8,16,32,64; --quick: 1,2): the slowest client's total time (the
dissertation's figure: time vs clients), mean/p50/p99/stddev over clients,
and the aggregate stat rate. --cold drops the kernel caches while the
clients wait at the barrier (root).

Dissertation: IMCa with 1 cache node took 82% less time than no cache at
64 clients.";

#[derive(clap::Args, Debug, Clone, Default)]
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

pub fn spec() -> crate::figure::Spec {
    crate::figure::Spec {
        title: "B1 stat: slowest client's time".into(),
        x: "clients",
        x_label: "client processes",
        y_label: "time of the slowest client (s)",
        log_x: true,
        ys: vec![("max_client_s", "time")],
        group_by: None,
    }
}

pub fn run(a: &Args, system: &System) -> anyhow::Result<Outcome> {
    let c = &a.common;
    let n = a.files.unwrap_or(if c.quick { 2048 } else { 262_144 }).max(1);
    let passes = a.passes.max(1);
    let clients = c.clients_or(&[1, 2, 4, 8, 16, 32, 64], &[1, 2]);
    let dir = c.dir.join("imca-bench-b1");
    if !a.keep {
        // a file left by an earlier run would be truncated, not created, and
        // its stat would come from what that run cached
        remove_files(&dir, c.quiet)?;
    }
    std::fs::create_dir_all(&dir)?;
    let progress = Progress::new("B1 create", c.quiet);
    let t = std::time::Instant::now();
    for i in 0..n {
        let p = stat_name(&dir, i);
        if !(a.keep && p.exists()) {
            std::fs::File::create(&p).map_err(|e| anyhow::anyhow!("creating {}: {e}", p.display()))?;
        }
        if (i + 1) % 4096 == 0 {
            progress.step(i + 1, n, "files");
        }
    }
    let create_s = t.elapsed().as_secs_f64();
    progress.done();

    let mut o = crate::outcome(
        "B1",
        "stat",
        c,
        system,
        serde_json::json!({"files": n, "passes": passes, "clients": clients, "create_seconds": create_s}),
    );
    o.columns = [
        "clients",
        "files",
        "max_client_s",
        "mean_client_s",
        "p50_client_s",
        "p99_client_s",
        "stddev_client_s",
        "stats_per_s",
        "us_per_stat",
    ]
    .map(String::from)
    .to_vec();
    let progress = Progress::new("B1 stat", c.quiet);
    for (step, &k) in clients.iter().enumerate() {
        progress.step(step + 1, clients.len(), &format!("{k} clients"));
        let mut pool = Pool::spawn(&Job::Stat { names: dir.clone(), files: n, passes }, k, &c.mounts())?;
        pool.leader().barrier_then(|| maybe_drop(c.cold))?;
        let spans: Vec<Span> = pool.leader().gather()?;
        pool.finish()?;
        let secs: Vec<f64> = spans.iter().map(|s| (s.end_ns.saturating_sub(s.start_ns)) as f64 / 1e9).collect();
        let s = Summary::of(&secs);
        let stats = (n * passes * k) as f64;
        o.rows.push(vec![
            k as f64,
            n as f64,
            s.max,
            s.mean,
            s.p50,
            s.p99,
            s.stddev,
            stats / s.max,
            s.max / (n * passes) as f64 * 1e6,
        ]);
    }
    progress.done();
    if !a.keep {
        remove_files(&dir, c.quiet)?;
    }
    Ok(o)
}

/// Remove `dir` and the files in it (B1 makes nothing else there), with a
/// progress line: a quarter of a million files take a while through FUSE.
fn remove_files(dir: &std::path::Path, quiet: bool) -> anyhow::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => anyhow::bail!("listing {}: {e}", dir.display()),
    };
    let paths = entries.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>()?;
    let progress = Progress::new("B1 remove", quiet);
    for (i, path) in paths.iter().enumerate() {
        std::fs::remove_file(path).map_err(|e| anyhow::anyhow!("removing {}: {e}", path.display()))?;
        if (i + 1) % 4096 == 0 {
            progress.step(i + 1, paths.len(), "files");
        }
    }
    std::fs::remove_dir(dir).map_err(|e| anyhow::anyhow!("removing {}: {e}", dir.display()))?;
    progress.done();
    Ok(())
}
