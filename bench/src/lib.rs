//! # bench — `imca bench`: the dissertation's benchmarks against any directory
//!
//! ```text
//!  imca bench stat|b1     --dir D   B1: create N files (untimed), then K clients stat every file
//!  imca bench latency|b2  --dir D   B2: write 1024 records of r bytes, read them back; r = 1 B .. 64 KiB
//!  imca bench b3          --dir D   B3: B2 by K clients at once, each on its own file
//!  imca bench b4          --dir D   B4: read one large file with 1..8 readers (MB/s)
//!  imca bench b5          --dir D   B5: B3 on one shared file, written by client 0 only
//!  imca bench changes     --dir D   create/rename/unlink N files, mkdir/rmdir, untar and rm -rf a real tree
//!  imca bench suite --target NAME=DIR … --out OUT   all of them on every target, one report
//! ```
//!
//! The directory may be an IMCa mount, another file system's mount, or a
//! local directory, so the same command measures IMCa and its peers. The
//! K clients of B1, B3, B4 and B5 are processes (the `imca` binary re-run
//! as a hidden `imca bench client`, see [`pool`]), released together by a
//! cross-process [`barrier`] before every phase and every record size.
//! `--cold` drops the kernel's caches while every client is parked at the
//! barrier before a timed phase (root only). One volume seen through several
//! mounts (several gateways: `--other-dirs`, or a suite target
//! `NAME=DIR1:DIR2`) spreads the clients over them, client k on mount k mod N
//! (the `mounts` module), as the dissertation's clients were on separate nodes.
//!
//! Every result states the configuration it ran under ([`config`]: target,
//! file system, block size, nodes, placement, transport; run parameters),
//! prints a table (or `--json`), and with `--out DIR` writes JSON, CSV and
//! the dissertation's figure as SVG and PNG ([`figure`]; the change
//! benchmark's is a bar chart, [`bars`]). Progress goes to stderr.

mod b1;
mod b2;
mod b3;
mod b4;
mod b5;
mod bars;
pub mod barrier;
mod change_phases;
mod changes;
mod client;
pub mod config;
mod dissertation;
pub mod figure;
pub mod outcome;
mod pool;
mod progress;
mod mounts;
mod records;
pub mod stats;
mod suite;
mod suite_changes;
mod tarball;
mod untar;
mod util;

use clap::{Parser, Subcommand};
use outcome::Outcome;
use std::path::PathBuf;

/// Options every benchmark takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Common {
    /// Directory to run in (a mount or any directory); a subdirectory is used.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// The same directory through other mounts of the same volume (other
    /// gateways), comma-separated: client k works through the (k mod N)th
    /// of --dir and these, at the same relative paths; files a benchmark
    /// prepares are made through --dir.
    #[arg(long, value_delimiter = ',', value_name = "DIR,…")]
    pub other_dirs: Vec<PathBuf>,
    /// Client processes, as a comma-separated sweep (e.g. 1,2,4,8); each
    /// count is a separate timed run. Default: the benchmark's own.
    #[arg(long, visible_alias = "threads", value_delimiter = ',', value_name = "K,…")]
    pub clients: Vec<usize>,
    /// Drop the kernel caches before each timed phase (needs root).
    #[arg(long)]
    pub cold: bool,
    /// Small sizes, for CI and quick looks.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// A label for this run (e.g. "imca-1node", "no-cache"), echoed in the output.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Also write JSON, CSV and the figure (SVG, PNG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub system: config::SystemArgs,
}

impl Common {
    /// --dir and --other-dirs: where each client works.
    pub fn mounts(&self) -> mounts::Mounts {
        mounts::Mounts::new(&self.dir, &self.other_dirs)
    }

    /// The client counts to sweep: as given, else `full` (or `quick` with --quick).
    pub fn clients_or(&self, full: &[usize], quick: &[usize]) -> Vec<usize> {
        let v = if !self.clients.is_empty() {
            self.clients.clone()
        } else if self.quick {
            quick.to_vec()
        } else {
            full.to_vec()
        };
        v.into_iter().map(|k| k.max(1)).collect()
    }
}

/// The record-size sweep of B2, B3 and B5.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Sweep {
    /// Smallest record size in bytes.
    #[arg(long, default_value_t = 1)]
    pub min: usize,
    /// Largest record size in bytes (default 64 KiB; --quick: 4 KiB).
    #[arg(long)]
    pub max: Option<usize>,
    /// Each record size is the previous one times this (default 2; --quick: 4).
    #[arg(long)]
    pub factor: Option<usize>,
    /// Records per size (default 1024, the dissertation's; --quick: 256).
    #[arg(long)]
    pub records: Option<usize>,
    /// Open with O_DIRECT, so every record is a request to the file system
    /// (through FUSE: no page cache, no readahead). Local file systems may
    /// refuse unaligned O_DIRECT; FUSE mounts accept it.
    #[arg(long)]
    pub direct: bool,
}

impl Sweep {
    pub fn sizes(&self, quick: bool) -> Vec<usize> {
        let max = self.max.unwrap_or(if quick { 4096 } else { 65536 });
        records::sweep(self.min, max, self.factor.unwrap_or(if quick { 4 } else { 2 }))
    }
    pub fn records(&self, quick: bool) -> usize {
        self.records.unwrap_or(if quick { 256 } else { 1024 }).max(1)
    }
    /// The sweep as stated in a result.
    pub fn stated(&self, quick: bool) -> serde_json::Value {
        serde_json::json!({
            "records": self.records(quick),
            "sizes": self.sizes(quick),
            "direct": self.direct,
        })
    }
}

#[derive(Subcommand, Debug)]
pub enum Which {
    /// B1: stat — every client stats every one of N files (time vs clients).
    #[command(visible_alias = "b1", long_about = b1::ABOUT)]
    Stat(b1::Args),
    /// B2: latency — sequential writes then reads of 1024 records per record size.
    #[command(visible_alias = "b2", long_about = b2::ABOUT)]
    Latency(b2::Args),
    /// B3: multi-client latency — B2 by K client processes at once, each on its own file.
    #[command(long_about = b3::ABOUT)]
    B3(b3::Args),
    /// B4: throughput — one large file read by 1..8 client processes (MB/s).
    #[command(long_about = b4::ABOUT)]
    B4(b4::Args),
    /// B5: sharing — B3 on one file: client 0 writes, every client reads.
    #[command(long_about = b5::ABOUT)]
    B5(b5::Args),
    /// Changes: create+write, rename, unlink N files; mkdir, rmdir; untar and rm -rf a real tree (ops/s).
    #[command(long_about = changes::ABOUT)]
    Changes(changes::Args),
    /// Every benchmark on every target; one report (Markdown, figures) beside the dissertation's numbers.
    #[command(long_about = suite::ABOUT)]
    Suite(suite::Args),
    /// One client process of B1/B3/B4/B5 (started by the benchmark itself).
    #[command(hide = true)]
    Client(client::Args),
}

/// `imca bench` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub which: Which,
}

#[derive(Parser)]
struct Standalone {
    #[command(flatten)]
    args: Args,
}

/// Entry point used by the `imca` binary.
pub fn main(args: Args) -> anyhow::Result<()> {
    let common = match &args.which {
        Which::Client(a) => return client::main(a),
        Which::Suite(a) => return suite::run(a),
        Which::Stat(a) => &a.common,
        Which::Latency(a) => &a.common,
        Which::B3(a) => &a.common,
        Which::B4(a) => &a.common,
        Which::B5(a) => &a.common,
        Which::Changes(a) => &a.common,
    };
    if !common.other_dirs.is_empty() {
        common.mounts().check()?; // (a lone --dir is made if missing, as before)
    }
    // the line figure's spec; None: the change benchmark's bar chart
    let (o, c, spec) = match args.which {
        Which::Client(_) | Which::Suite(_) => unreachable!("returned above"),
        Which::Stat(a) => (b1::run(&a, &a.common.system.describe(&a.common.dir)?)?, a.common, Some(b1::spec())),
        Which::Latency(a) => (b2::run(&a, &a.common.system.describe(&a.common.dir)?)?, a.common, Some(b2::spec())),
        Which::B3(a) => (b3::run(&a, &a.common.system.describe(&a.common.dir)?)?, a.common, Some(b3::spec())),
        Which::B4(a) => (b4::run(&a, &a.common.system.describe(&a.common.dir)?)?, a.common, Some(b4::spec())),
        Which::B5(a) => (b5::run(&a, &a.common.system.describe(&a.common.dir)?)?, a.common, Some(b5::spec())),
        Which::Changes(a) => {
            let system = a.common.system.describe(&a.common.dir)?;
            (changes::run(&a, &system, &a.tarball()?)?, a.common, None)
        }
    };
    if c.json {
        println!("{}", serde_json::to_string(&o)?);
    } else {
        print!("{}", o.table());
    }
    if let Some(out) = &c.out {
        let stem = o.bench.to_lowercase();
        let mut files = o.write(out, &stem)?;
        let drawn = match &spec {
            Some(spec) => figure::draw(spec, &figure::series(spec, &[(c.label.as_str(), &o)]), out, &stem),
            None => changes::draw(&[(c.label.as_str(), &o)], out, &stem),
        };
        match drawn {
            Ok(f) => files.extend(f),
            Err(e) => eprintln!("imca bench: no figure: {e}"),
        }
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    // after the outputs are written: a change run whose untarred tree was
    // not the tarball's fails (the other benchmarks' results always pass)
    changes::verdict(&o)
}

/// Parse arguments as `imca bench` would (for tests).
pub fn parse(argv: &[&str]) -> anyhow::Result<Args> {
    Ok(Standalone::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?.args)
}

/// The outcome skeleton every benchmark fills in.
fn outcome(bench: &str, name: &str, c: &Common, system: &config::System, run: serde_json::Value) -> Outcome {
    let mut run = run;
    if let Some(m) = run.as_object_mut() {
        m.insert("cold".into(), c.cold.into());
        m.insert("quick".into(), c.quick.into());
        if !c.other_dirs.is_empty() {
            // clients spread over several mounts (gateways): say so
            m.insert("mounts".into(), c.mounts().len().into());
            m.insert("other_dirs".into(), serde_json::json!(c.other_dirs));
        }
    }
    Outcome {
        bench: bench.into(),
        name: name.into(),
        label: c.label.clone(),
        system: system.clone(),
        run,
        columns: Vec::new(),
        rows: Vec::new(),
        names: None,
    }
}
