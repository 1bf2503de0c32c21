//! # bench — `imca bench`: the dissertation's benchmarks against any directory
//!
//! ```text
//!  imca bench stat    --dir D   B1: create N files (untimed), then K clients stat every file
//!  imca bench latency --dir D   B2: write 1024 records of r bytes, read them back; r = 1 B .. 64 KiB
//! ```
//!
//! The directory may be an IMCa mount, another file system's mount, or a
//! local directory, so the same command measures IMCa and its peers (run it
//! against a `--no-cache` mount for the baseline). Clients are threads of
//! this process; a barrier separates every phase. `--cold` drops the
//! kernel's page, dentry and inode caches before each timed phase (root
//! only), as the dissertation's disk-bound servers had no warm cache.
//! Tables on stdout; `--json` prints one JSON object instead.

mod b1;
mod b2;
mod util;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Options every benchmark takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Directory to run in (a mount or any directory); a subdirectory is used.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Concurrent clients (threads), each timed separately.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Drop the kernel caches before each timed phase (needs root).
    #[arg(long)]
    pub cold: bool,
    /// Small sizes, for CI and quick looks.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// A label for this run (e.g. "imca-1node", "no-cache"), echoed in the output.
    #[arg(long, default_value = "")]
    pub label: String,
}

#[derive(Subcommand, Debug)]
pub enum Which {
    /// B1: stat rate — every client stats every one of N files.
    Stat(b1::Args),
    /// B2: latency — sequential writes then reads of 1024 records per record size.
    Latency(b2::Args),
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
    let out = match args.which {
        Which::Stat(a) => b1::run(&a)?,
        Which::Latency(a) => b2::run(&a)?,
    };
    println!("{out}");
    Ok(())
}

/// Parse arguments as `imca bench` would (for tests).
pub fn parse(argv: &[&str]) -> anyhow::Result<Args> {
    Ok(Standalone::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?.args)
}
