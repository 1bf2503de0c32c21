//! `imca cache-node` without the rest of the workspace: same flags, same code.
//! Handy for benchmarks (`cargo build --release -p cache-node --example cache-node`).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: cache_node::Args,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("IMCA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    cache_node::main(Cli::parse().args)
}
