//! cache-node (under construction: the owner of this crate replaces this file).

/// Command-line arguments of this subcommand.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Entry point used by the `imca` binary; builds its own runtime.
pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("cache-node is not built yet")
}
