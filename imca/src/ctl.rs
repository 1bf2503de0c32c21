//! imca ctl (under construction).

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("imca ctl is not built yet")
}
