//! The bank's command-line flags, shared by `imca storage` and `imca mount`
//! (flattened into their Args): how this daemon stores values and how it
//! logs in to the cache nodes. The value key itself comes from the volume
//! secret (`--secret-file`), set by the daemon.

use crate::{BankOptions, Credentials, CredentialsError};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct BankArgs {
    // XChaCha20-Poly1305 with a key derived from the volume secret; every
    // daemon reads encrypted and plain values alike, so daemons need not agree.
    /// Encrypt the values this daemon stores in the cache bank, for cache
    /// nodes on a network others can read (needs the volume secret).
    #[arg(long, env = "IMCA_CACHE_ENCRYPT", value_parser = clap::builder::FalseyValueParser::new())]
    pub cache_encrypt: bool,
    /// Log in to the cache nodes (`-Y`) with FILE's first line,
    /// `user:password`, instead of the login derived from the volume secret.
    #[arg(long, value_name = "FILE")]
    pub cache_auth_file: Option<PathBuf>,
    /// Use cache nodes that serve requests without a login. Any local user
    /// can then read the bank and write old values back into it.
    #[arg(long, env = "IMCA_CACHE_ALLOW_OPEN_NODES", value_parser = clap::builder::FalseyValueParser::new())]
    pub cache_allow_open_nodes: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BankArgsError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("--cache-encrypt needs the volume secret (the bank key derives from it); it cannot be used with --insecure")]
    EncryptWithoutKey,
}

impl BankArgs {
    /// `opts` with these flags applied (reads `--cache-auth-file`, and gives
    /// the login to `volume::probe` too). Call after the daemon has set
    /// `opts.value_key` and `opts.node_credentials` (the volume's login,
    /// [`Credentials::of_volume`], unless it runs `--insecure`).
    pub fn apply(&self, opts: BankOptions) -> Result<BankOptions, BankArgsError> {
        if self.cache_encrypt && opts.value_key.is_none() {
            return Err(BankArgsError::EncryptWithoutKey);
        }
        let node_credentials = match &self.cache_auth_file {
            Some(p) => Some(Credentials::load(p)?),
            None => opts.node_credentials,
        };
        if let Some(c) = &node_credentials {
            // the control plane's own node probes (join, stats, flush,
            // readmission) must log in as the banks do
            volume::probe::set_login(c.login_command());
        }
        // Without any login there is nothing to require of the nodes (`--insecure`).
        let allow_open_nodes = self.cache_allow_open_nodes || node_credentials.is_none();
        if !allow_open_nodes {
            volume::probe::refuse_open_nodes();
        } else {
            tracing::warn!(
                "cache nodes that serve requests without a login are used ({}): any local user can read the bank \
                 and write old values back",
                if node_credentials.is_none() { "no volume secret to log in with" } else { "--cache-allow-open-nodes" }
            );
        }
        Ok(BankOptions {
            encrypt_values: self.cache_encrypt || opts.encrypt_values,
            node_credentials,
            allow_open_nodes,
            ..opts
        })
    }
}
