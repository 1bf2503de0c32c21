//! `imca secret new FILE`: create a volume secret for a volume deployed by
//! hand (`imca up` makes its own). The same file then goes to every
//! storage server and gateway of the volume (`--secret-file`).
//! `imca secret cache-auth` writes the cache nodes' login file from it.

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
    /// Write the cache nodes' login file (`-Y` of memcached and of `imca
    /// cache-node`), derived from the volume secret, to OUT (mode 0600).
    CacheAuth {
        /// The volume secret.
        #[arg(long, value_name = "FILE")]
        secret_file: PathBuf,
        /// Where to write `imca:<password>`; an existing file is replaced.
        out: PathBuf,
    },
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
        Cmd::CacheAuth { secret_file, out } => {
            let login = cache_bank::Credentials::of_volume(&secret::Secret::load(&secret_file)?);
            write_private(&out, login.auth_file_line().as_bytes())?;
            println!(
                "wrote the cache nodes' login to {} (mode 0600); start every cache node with -Y {} \
                 (memcached or imca cache-node); the volume's daemons log in with it by themselves",
                out.display(),
                out.display()
            );
        }
    }
    Ok(())
}

/// Write `bytes` to `path` as a new file only its owner can read (a
/// replaced file is written beside it and renamed, so it is never readable
/// by others, even for a moment).
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
