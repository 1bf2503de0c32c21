//! Why a bank request did not produce an answer. Callers on the read path
//! turn every one of these into a miss; the server side waits and retries.

use std::time::Duration;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BankError {
    /// the node is in back-off after an earlier failure
    #[error("node {0} is backed off")]
    Down(String),
    /// nobody listens at the node's address: its process is gone, and so is
    /// everything it held (the one failure that proves a node empty)
    #[error("node {0} refused the connection")]
    Refused(String),
    #[error("node {0} did not answer within {1:?}")]
    Timeout(String, Duration),
    #[error("connection to node {0} failed: {1}")]
    Io(String, String),
    #[error("node {0} answered with an error: {1}")]
    Server(String, String),
    #[error("node {0} violated the protocol: {1}")]
    Protocol(String, String),
}

impl BankError {
    /// The node the error is about.
    pub fn node(&self) -> &str {
        match self {
            BankError::Down(n)
            | BankError::Refused(n)
            | BankError::Timeout(n, _)
            | BankError::Io(n, _)
            | BankError::Server(n, _)
            | BankError::Protocol(n, _) => n,
        }
    }
}
