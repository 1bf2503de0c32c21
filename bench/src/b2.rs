//! B2 (latency): for record sizes r = 1 B, 2 B, … up to `--max`: write 1024
//! records of r bytes sequentially to a fresh file, then (after reopening)
//! read them back from the start the same way. One client, in this process.
//! Reported: mean, p50, p99 and stddev µs per write and per read, per r.

use crate::config::System;
use crate::outcome::Outcome;
use crate::progress::Progress;
use crate::records;
use crate::stats::latency_us;
use crate::util::maybe_drop;
use crate::{Common, Sweep};

pub const ABOUT: &str = "B2 (latency), the dissertation's single-client latency benchmark.

For each record size r = 1 B, 2 B, 4 B, … 64 KiB (--quick: 1 B, 4 B, … 4 KiB):
write 1024 records of r bytes sequentially to a fresh file in
DIR/imca-bench-b2 (--quick: 256), then read them back from the start the
same way; every record read is checked. Reported per r: mean, p50, p99 and
stddev µs per write and per read. Figure: latency vs record size; run it
once per block size (`imca ctl block-size`) with distinct --label/--out, or
use `imca bench suite` with one target per block size.

Through FUSE, use --direct so every record reaches the file system (no page
cache); --cold drops the kernel caches before each read pass (root).

Dissertation: 1-byte reads 59% (256 B blocks), 45% (2 KiB), 31% (8 KiB)
faster than no cache.";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: Sweep,
    /// Read passes per size (the statistics cover all of them).
    #[arg(long, default_value_t = 1)]
    pub read_passes: usize,
}

/// The columns of a latency table (B2; B3 adds `clients` in front).
pub const LATENCY_COLUMNS: [&str; 9] = [
    "record",
    "write_mean_us",
    "write_p50_us",
    "write_p99_us",
    "write_stddev_us",
    "read_mean_us",
    "read_p50_us",
    "read_p99_us",
    "read_stddev_us",
];

pub fn spec() -> crate::figure::Spec {
    crate::figure::Spec {
        title: "B2 latency vs record size".into(),
        x: "record",
        x_label: "record size (bytes)",
        y_label: "mean latency (µs)",
        log_x: true,
        ys: vec![("read_mean_us", "read"), ("write_mean_us", "write")],
        group_by: None,
    }
}

pub fn run(a: &Args, system: &System) -> anyhow::Result<Outcome> {
    let c = &a.common;
    let (sizes, n) = (a.sweep.sizes(c.quick), a.sweep.records(c.quick));
    let dir = c.dir.join("imca-bench-b2");
    std::fs::create_dir_all(&dir)?;
    let mut run = a.sweep.stated(c.quick);
    run["read_passes"] = a.read_passes.into();
    run["clients"] = 1.into();
    let mut o = crate::outcome("B2", "latency", c, system, run);
    o.columns = LATENCY_COLUMNS.map(String::from).to_vec();
    let progress = Progress::new("B2", c.quiet);
    for (step, &r) in sizes.iter().enumerate() {
        progress.step(step + 1, sizes.len(), &format!("record {r} B"));
        let path = dir.join(format!("r{r}"));
        let w = records::write(&path, r, n, a.sweep.direct)?;
        let mut reads = Vec::new();
        for _ in 0..a.read_passes.max(1) {
            maybe_drop(c.cold)?;
            reads.push(records::read(&path, r, n, a.sweep.direct)?);
        }
        std::fs::remove_file(&path)?;
        let read_refs: Vec<&[u64]> = reads.iter().map(Vec::as_slice).collect();
        let mut row = vec![r as f64];
        row.extend(latency_us(&[&w]));
        // passes of one client: pool them (one "client"), not one mean each
        let pooled: Vec<u64> = read_refs.concat();
        row.extend(latency_us(&[&pooled]));
        o.rows.push(row);
    }
    progress.done();
    Ok(o)
}
