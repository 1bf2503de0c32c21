//! Why a config or a change of it was refused. Every entry point turns
//! these into its own answer: the admin API into an HTTP status (`admin`),
//! `imca mount` and `imca storage` into a start-up error, a storage server
//! into a refused SetVolumeConfig.

/// A config that breaks a rule of the options table; `field` names the
/// option (or `addr` for a cache-node address), `message` says why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    pub field: &'static str,
    pub message: String,
}

impl Invalid {
    pub fn new(field: &'static str, message: impl Into<String>) -> Invalid {
        Invalid { field, message: message.into() }
    }
}

/// Why a change did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// the proposed config breaks a rule (nothing was sent anywhere)
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// someone changed the config first (the epoch moved); re-read and retry
    #[error("{0}")]
    Conflict(String),
    /// the storage servers (or the authority, server 0) cannot be reached
    #[error("{0}")]
    Unavailable(String),
    /// a state that should not happen (a volume without storage servers)
    #[error("{0}")]
    Internal(String),
}
