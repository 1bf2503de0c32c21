//! `--secret-file FILE` / `--insecure`: how `imca storage` and `imca mount`
//! get the volume secret (see the `secret` crate). One is required: a
//! daemon never runs unauthenticated by accident.

use secret::Secret;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Credentials {
    // Storage RPC connections are authenticated with it both ways, and bank
    // values carry a MAC made with it (docs/design.md, trust boundaries).
    /// The volume secret (`imca secret new FILE`; mode 0600), the same file
    /// for every storage server and gateway of the volume.
    #[arg(long, value_name = "FILE", env = "IMCA_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// Run without authentication, so any local user can read and write
    /// every file; only for measuring what authentication costs.
    #[arg(long, env = "IMCA_INSECURE", value_parser = clap::builder::FalseyValueParser::new(),
          conflicts_with = "secret_file")]
    pub insecure: bool,
    /// A secret already in memory (in-process daemons, tests); wins over the file.
    #[arg(skip)]
    pub secret: Option<Secret>,
}

impl Credentials {
    pub fn with(secret: Secret) -> Credentials {
        Credentials { secret: Some(secret), ..Default::default() }
    }

    pub fn insecure() -> Credentials {
        Credentials { insecure: true, ..Default::default() }
    }

    /// The secret, `None` when running `--insecure`, or an error that says
    /// what to give.
    pub fn load(&self) -> anyhow::Result<Option<Secret>> {
        if let Some(s) = &self.secret {
            return Ok(Some(s.clone()));
        }
        match (&self.secret_file, self.insecure) {
            (Some(p), _) => Ok(Some(Secret::load(p)?)),
            (None, true) => {
                tracing::warn!("running --insecure: storage RPC peers are not authenticated and bank values not MACed");
                Ok(None)
            }
            (None, false) => anyhow::bail!(
                "no volume secret: give --secret-file FILE (the volume's secret, shared by its storage servers \
                 and gateways; `imca secret new FILE` creates one, `imca up` makes one in its data dir), \
                 or --insecure to run without authentication"
            ),
        }
    }
}
