//! B3 (multi-client latency): B2 run by K client processes at once, each
//! on its own file, with a barrier before every phase and every record
//! size. Reported per (K, r): the mean of the per-client average latency
//! (the dissertation's figure), pooled p50, p99 and stddev. [`rounds`] is
//! the phase driver B5 shares.

use crate::client::{latency_file, Job, Ops};
use crate::config::System;
use crate::outcome::Outcome;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::stats::latency_us;
use crate::util::maybe_drop;
use crate::{Common, Sweep};
use std::path::Path;

pub const ABOUT: &str = "B3 (multi-client latency): B2 run by K client processes at once.

Each client has its own file in DIR/imca-bench-b3. For each record size r
(1 B, 2 B, … 64 KiB; --quick: 1 B, 4 B, … 4 KiB): barrier; every client
writes 1024 records of r bytes (--quick: 256); barrier; every client reads
them back; results. Clients are processes, K from --clients (default 32,
the dissertation's; --quick: 2; a list such as 2,8,32 runs each). Reported
per K and r: mean of the per-client average µs per write and per read, and
p50/p99/stddev over all operations. Figure: latency vs record size, one
line per K. --direct and --cold as for B2.

Dissertation: 32 clients, 4 cache nodes: 1-byte reads 82% faster than no
cache.";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: Sweep,
}

pub fn spec() -> crate::figure::Spec {
    crate::figure::Spec {
        title: "B3 multi-client latency vs record size".into(),
        x: "record",
        x_label: "record size (bytes)",
        y_label: "mean of per-client mean latency (µs)",
        log_x: true,
        ys: vec![("read_mean_us", "read"), ("write_mean_us", "write")],
        group_by: Some(("clients", "K=")),
    }
}

/// The latency phases B3 and B5 run.
pub struct Phases<'a> {
    pub dir: &'a Path,
    /// the mounts `dir` is under (clients spread over them)
    pub mounts: &'a crate::mounts::Mounts,
    /// B5: one file, written by client 0 only
    pub shared: bool,
    pub sizes: &'a [usize],
    pub records: usize,
    pub direct: bool,
    pub cold: bool,
}

/// Run the latency phases with `k` clients; per size, every client's
/// operations. The files are removed once all clients read them.
pub fn rounds(p: &Phases, k: usize, progress: &Progress) -> anyhow::Result<Vec<Vec<Ops>>> {
    let Phases { dir, mounts, shared, sizes, records, direct, cold } = *p;
    let tag = format!("k{k}");
    let job = Job::Latency { dir: dir.to_path_buf(), tag: tag.clone(), sizes: sizes.to_vec(), records, direct, shared };
    let mut pool = Pool::spawn(&job, k, mounts)?;
    let mut out = Vec::new();
    for (step, &r) in sizes.iter().enumerate() {
        progress.step(step + 1, sizes.len(), &format!("{k} clients, record {r} B"));
        pool.leader().barrier()?; // start of the write phase
        pool.leader().barrier_then(|| maybe_drop(cold))?; // start of the read phase
        out.push(pool.leader().gather::<Ops>()?);
        for i in 0..if shared { 1 } else { k } {
            let _ = std::fs::remove_file(latency_file(dir, &tag, shared, i, r));
        }
    }
    pool.finish()?;
    Ok(out)
}

pub fn run(a: &Args, system: &System) -> anyhow::Result<Outcome> {
    let c = &a.common;
    let (sizes, n) = (a.sweep.sizes(c.quick), a.sweep.records(c.quick));
    let clients = c.clients_or(&[32], &[2]);
    let dir = c.dir.join("imca-bench-b3");
    std::fs::create_dir_all(&dir)?;
    let mut run = a.sweep.stated(c.quick);
    run["clients"] = serde_json::json!(clients);
    let mut o = crate::outcome("B3", "multi-client latency", c, system, run);
    o.columns = std::iter::once("clients").chain(crate::b2::LATENCY_COLUMNS).map(String::from).collect();
    let progress = Progress::new("B3", c.quiet);
    let mounts = c.mounts();
    for &k in &clients {
        let phases = Phases { dir: &dir, mounts: &mounts, shared: false, sizes: &sizes, records: n, direct: a.sweep.direct, cold: c.cold };
        let per_size = rounds(&phases, k, &progress)?;
        for (&r, ops) in sizes.iter().zip(&per_size) {
            let w: Vec<&[u64]> = ops.iter().map(|o| o.write_ns.as_slice()).collect();
            let rd: Vec<&[u64]> = ops.iter().map(|o| o.read_ns.as_slice()).collect();
            let mut row = vec![k as f64, r as f64];
            row.extend(latency_us(&w));
            row.extend(latency_us(&rd));
            o.rows.push(row);
        }
    }
    progress.done();
    Ok(o)
}
