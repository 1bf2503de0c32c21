//! B5 (sharing): B3 with every client on the same file — only client 0
//! writes it, every client reads it — for each client count of the sweep.
//! Reported per (K, r): mean of the per-client average read latency (the
//! dissertation's figure: latency vs clients), pooled p50, p99, stddev,
//! and client 0's write latency.

use crate::b3::{rounds, Phases};
use crate::config::System;
use crate::outcome::Outcome;
use crate::progress::Progress;
use crate::stats::latency_us;
use crate::{Common, Sweep};

pub const ABOUT: &str = "B5 (sharing): many readers of one file that one client writes.

For each client count K of --clients (default 1,2,4,8,16,32; --quick: 1,2)
and each record size r (1 B … 64 KiB; --quick: 1 B, 4 B, … 4 KiB): barrier;
client 0 writes 1024 records of r bytes (--quick: 256) to one shared file in
DIR/imca-bench-b5; barrier; every client reads them all back; results.
Clients are processes. Reported per K and r: mean of the per-client average
read µs, p50/p99/stddev over all reads, client 0's mean write µs. Figure:
read latency vs clients, one line per record size. --direct and --cold as
for B2.

Dissertation: 32 clients, 1 cache node: reads 45% faster than no cache.";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub sweep: Sweep,
}

pub fn spec() -> crate::figure::Spec {
    crate::figure::Spec {
        title: "B5 sharing: read latency vs clients".into(),
        x: "clients",
        x_label: "client processes (one writer, all read)",
        y_label: "mean of per-client mean read latency (µs)",
        log_x: true,
        ys: vec![("read_mean_us", "read")],
        group_by: Some(("record", "r=")),
    }
}

pub fn run(a: &Args, system: &System) -> anyhow::Result<Outcome> {
    let c = &a.common;
    let (sizes, n) = (a.sweep.sizes(c.quick), a.sweep.records(c.quick));
    let clients = c.clients_or(&[1, 2, 4, 8, 16, 32], &[1, 2]);
    let dir = c.dir.join("imca-bench-b5");
    std::fs::create_dir_all(&dir)?;
    let mut run = a.sweep.stated(c.quick);
    run["clients"] = serde_json::json!(clients);
    let mut o = crate::outcome("B5", "sharing", c, system, run);
    o.columns = ["clients", "record", "read_mean_us", "read_p50_us", "read_p99_us", "read_stddev_us", "write_mean_us"]
        .map(String::from)
        .to_vec();
    let progress = Progress::new("B5", c.quiet);
    let phases = Phases { dir: &dir, mounts: &c.mounts(), shared: true, sizes: &sizes, records: n, direct: a.sweep.direct, cold: c.cold };
    for &k in &clients {
        for (&r, ops) in sizes.iter().zip(rounds(&phases, k, &progress)?) {
            let rd: Vec<&[u64]> = ops.iter().map(|o| o.read_ns.as_slice()).collect();
            let w: Vec<&[u64]> = ops.iter().map(|o| o.write_ns.as_slice()).collect();
            let mut row = vec![k as f64, r as f64];
            row.extend(latency_us(&rd));
            row.push(latency_us(&w)[0]);
            o.rows.push(row);
        }
    }
    progress.done();
    Ok(o)
}
