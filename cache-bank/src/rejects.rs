//! Values the bank refused (see [`crate::codec`]): each is a miss, counted
//! in `imca_bank_value_rejected_total{reason}`, and logged — at most one
//! warning per [`LOG_EVERY`] per process, carrying the count since the last
//! one, because a forger (or a misconfigured daemon writing under another
//! key) can make every read fail and must not be able to flood the log.

use crate::metrics::BankMetrics;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Why a value was refused (the metric's `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// not an IMCa value, truncated, or an unknown version
    Foreign,
    /// a CRC-framed value, read by a bank with a key (a forgery, or a
    /// daemon of this volume started `--insecure`)
    InsecureValue,
    /// a keyed value, read by a bank without one (we run `--insecure`)
    KeyedValue,
    /// another kind of value under this key
    Kind,
    /// the MAC does not match: forged, corrupted, or written under another key
    Mac,
    /// an encrypted value that does not open (same causes as `Mac`)
    Decrypt,
    /// CRC mismatch (insecure banks): corrupted or stored under another key
    Checksum,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::Foreign => "foreign",
            Reason::InsecureValue => "insecure_value",
            Reason::KeyedValue => "keyed_value",
            Reason::Kind => "kind",
            Reason::Mac => "mac",
            Reason::Decrypt => "decrypt",
            Reason::Checksum => "checksum",
        }
    }
}

/// (when we last warned, refusals since)
static LOG: Mutex<(Option<Instant>, u64)> = Mutex::new((None, 0));

pub(crate) fn note(metrics: &BankMetrics, reason: Reason, key: &str) {
    metrics.rejected.with_label_values(&[reason.label()]).inc();
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    log.1 += 1;
    let now = Instant::now();
    if log.0.is_none_or(|t| now.duration_since(t) >= LOG_EVERY) {
        tracing::warn!(
            reason = reason.label(),
            key,
            refused_since_last_warning = log.1,
            "cache bank value refused (forged, corrupted, or written under another volume key); treated as a miss"
        );
        *log = (Some(now), 0);
    }
}
