//! # imca — one binary for every IMCa daemon and tool
//!
//! ```text
//!  imca cache-node   memcached-compatible cache node (the bank)
//!  imca storage      storage server exporting a directory
//!  imca mount        FUSE gateway (client translator graph)
//!  imca up           a whole local cluster, mounted, in one command
//!  imca bench        the dissertation's benchmarks against any directory
//!  imca ctl          talk to a gateway's admin API
//!  imca secret       create or check a volume secret
//! ```
//!
//! Each subcommand's arguments and entry point live in its own crate; this
//! file only dispatches and sets up logging.

mod ctl;
mod heal_cmd;
mod secret_cmd;
mod up;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "imca", version, about = "IMCa: an intermediate memory-caching tier for a clustered NAS")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a memcached-compatible cache node (accepts memcached's -p -l -m -c -t -I -U flags).
    CacheNode(cache_node::Args),
    /// Run a storage server exporting a directory.
    Storage(storage_server::Args),
    /// Mount the volume through a FUSE gateway.
    Mount(gateway::Args),
    /// Start a whole local cluster (storage servers, cache nodes, a mounted gateway).
    Up(up::Args),
    /// Run the dissertation's benchmarks against a directory.
    Bench(bench::Args),
    /// Talk to a gateway's admin API.
    Ctl(ctl::Args),
    /// Create or check a volume secret (`--secret-file` of storage and mount).
    Secret(secret_cmd::Args),
    /// Repair the storage servers' names under a directory of a mounted
    /// volume after a server crashed mid-change (root; walks it through the gateway).
    Heal(heal_cmd::Args),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("IMCA_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::CacheNode(a) => cache_node::main(a),
        Cmd::Storage(a) => storage_server::main(a),
        Cmd::Mount(a) => gateway::main(a),
        Cmd::Up(a) => up::main(a),
        Cmd::Bench(a) => bench::main(a),
        Cmd::Ctl(a) => ctl::main(a),
        Cmd::Secret(a) => secret_cmd::main(a),
        Cmd::Heal(a) => heal_cmd::main(a),
    };
    if let Err(e) = result {
        eprintln!("imca: error: {e:#}");
        // memcached's exit status for a bad command line, for init scripts
        // that replace memcached with `imca cache-node`
        std::process::exit(cache_node::config::exit_status(&e));
    }
}
