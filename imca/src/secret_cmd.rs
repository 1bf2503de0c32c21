//! `imca secret new FILE`: create a volume secret for a volume deployed by
//! hand (`imca up` makes its own). The same file then goes to every
//! storage server and gateway of the volume (`--secret-file`).

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Write a new random volume secret to FILE (mode 0600; refuses to
    /// overwrite: every daemon of a volume must keep the same secret).
    New { file: PathBuf },
    /// Check that FILE is a usable volume secret (as the daemons will).
    Check { file: PathBuf },
}

pub fn main(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Cmd::New { file } => {
            secret::Secret::generate().write_new(&file)?;
            println!("wrote a new volume secret to {} (mode 0600); give it to every storage server and gateway with --secret-file", file.display());
        }
        Cmd::Check { file } => {
            secret::Secret::load(&file)?;
            println!("{}: a usable volume secret", file.display());
        }
    }
    Ok(())
}
