//! What the HTTP layer needs from a gateway, and the JSON shapes it returns.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use volume::{CacheConfig, Limits};

/// Why an admin request failed; each variant is one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// 400: the request itself is wrong; `field` names the offending field.
    #[error("{message}")]
    BadRequest { field: Option<String>, message: String },
    /// 404: no such cache node (or other named thing).
    #[error("{0}")]
    NotFound(String),
    /// 409: someone else changed the config first (epoch moved); re-read and retry.
    #[error("{0}")]
    Conflict(String),
    /// 401: missing or wrong bearer token (or a change asked of a read-only API).
    #[error("{0}")]
    Unauthorized(String),
    /// 408: the request body did not arrive in time.
    #[error("{0}")]
    Timeout(String),
    /// 413: the request body is larger than the API accepts.
    #[error("{0}")]
    TooLarge(String),
    /// 503: the storage servers (or the authority, server 0) cannot be reached.
    #[error("{0}")]
    Unavailable(String),
    /// 500: a bug or an unexpected state.
    #[error("{0}")]
    Internal(String),
}

impl AdminError {
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> AdminError {
        AdminError::BadRequest { field: Some(field.into()), message: message.into() }
    }

    pub fn status_code(&self) -> u16 {
        match self {
            AdminError::BadRequest { .. } => 400,
            AdminError::Unauthorized(_) => 401,
            AdminError::NotFound(_) => 404,
            AdminError::Timeout(_) => 408,
            AdminError::Conflict(_) => 409,
            AdminError::TooLarge(_) => 413,
            AdminError::Internal(_) => 500,
            AdminError::Unavailable(_) => 503,
        }
    }

    /// Short machine-readable kind, the `error` member of the JSON body.
    pub fn kind(&self) -> &'static str {
        match self {
            AdminError::BadRequest { .. } => "bad_request",
            AdminError::Unauthorized(_) => "unauthorized",
            AdminError::NotFound(_) => "not_found",
            AdminError::Timeout(_) => "timeout",
            AdminError::Conflict(_) => "conflict",
            AdminError::TooLarge(_) => "too_large",
            AdminError::Internal(_) => "internal",
            AdminError::Unavailable(_) => "unavailable",
        }
    }

    /// The JSON error body: `{"error": kind, "message": ..., "field": ...}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "error": self.kind(), "message": self.to_string() });
        if let AdminError::BadRequest { field: Some(f), .. } = self {
            v["field"] = serde_json::Value::String(f.clone());
        }
        v
    }
}

/// The control plane's refusals, each as its HTTP status: a rule broken →
/// 400 naming the field, the epoch moved → 409, no authority → 503.
impl From<volume::Error> for AdminError {
    fn from(e: volume::Error) -> AdminError {
        match e {
            volume::Error::Invalid(i) => AdminError::from(i),
            volume::Error::Conflict(m) => AdminError::Conflict(m),
            volume::Error::Unavailable(m) => AdminError::Unavailable(m),
            volume::Error::Internal(m) => AdminError::Internal(m),
        }
    }
}

impl From<volume::Invalid> for AdminError {
    fn from(i: volume::Invalid) -> AdminError {
        AdminError::bad(i.field, i.message)
    }
}

/// One storage server as this gateway sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerStatus {
    pub addr: String,
    pub healthy: bool,
    /// the config epoch this server stamps on its replies
    pub epoch: Option<u64>,
    /// round trip of the status probe
    pub latency_ms: Option<f64>,
    pub error: Option<String>,
}

/// One cache node: health as the bank client sees it, hit counts from this
/// gateway, and the node's own stats (items, bytes) when it answered `stats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    pub addr: String,
    pub healthy: bool,
    /// fenced nodes are skipped by everyone until flushed
    pub fenced: bool,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: Option<f64>,
    pub items: Option<u64>,
    pub bytes: Option<u64>,
    pub limit_bytes: Option<u64>,
    pub evictions: Option<u64>,
    /// what the node did with a request made without a login at this
    /// gateway's last connect: "required" (a login is needed) or "none"
    /// (anyone may read and write it); unknown before the first connect
    pub login: Option<String>,
    pub error: Option<String>,
}

/// Hits and misses of one cached operation (lookup, getattr = stat, read) at this gateway.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OpHitRatio {
    pub op: String,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: Option<f64>,
}

impl OpHitRatio {
    pub fn new(op: impl Into<String>, hits: u64, misses: u64) -> OpHitRatio {
        OpHitRatio { op: op.into(), hits, misses, hit_ratio: ratio(hits, misses) }
    }
}

/// hits / (hits + misses), or None before the first lookup.
pub fn ratio(hits: u64, misses: u64) -> Option<f64> {
    let total = hits + misses;
    (total > 0).then(|| hits as f64 / total as f64)
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GatewayInfo {
    pub version: String,
    pub mountpoint: Option<String>,
    pub uptime_seconds: u64,
    pub transport: Option<String>,
    /// `--cache-allow-open-nodes` (or no volume secret): cache nodes that
    /// serve requests without a login are used
    pub open_cache_nodes_allowed: bool,
}

/// `GET /api/v1/status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    pub volume: String,
    /// the epoch this gateway currently uses for cache keys
    pub epoch: u64,
    pub config: CacheConfig,
    pub gateway: GatewayInfo,
    /// the client-side translator graph, top to bottom
    pub pipeline: Vec<String>,
    pub storage_servers: Vec<ServerStatus>,
    pub cache_nodes: Vec<NodeStatus>,
    pub hit_ratio: Vec<OpHitRatio>,
    /// when and how long this gateway ran without its bank
    pub bank_bypass: BankBypass,
    /// what this gateway's background heal still has to repair
    pub heals: Heals,
}

/// The gateway's background heal (`stripe`'s heal index): names an
/// operation may have left different between servers, not healed yet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Heals {
    /// names recorded and not healed yet
    pub pending: u64,
    /// the index overflowed: a full sweep (`imca heal`) runs once every server answers
    pub sweep_needed: bool,
    /// names given up after repeated failures (left to `imca heal`)
    pub given_up: u64,
}

/// The gateway's bank bypass episodes (its config lease ran out:
/// `volume::bypass`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BankBypass {
    /// bypassing now
    pub active: bool,
    /// how long the episode under way has lasted
    pub for_seconds: Option<f64>,
    /// episodes since the gateway started (the one under way included)
    pub episodes: u64,
    /// time spent bypassing (the episode under way included)
    pub seconds_total: f64,
}

/// What one node said to `flush_all`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeFlush {
    pub addr: String,
    pub ok: bool,
    pub error: Option<String>,
}

/// `POST /api/v1/cache/flush`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlushReport {
    pub epoch: u64,
    pub nodes: Vec<NodeFlush>,
}

/// A gateway as the admin API sees it. The HTTP layer admits every change
/// (`volume::change::admit`: options table, [`Limits`], node reachability)
/// before calling [`AdminBackend::apply_config`], so a backend only has to
/// make a valid change take effect everywhere — or nowhere.
#[async_trait]
pub trait AdminBackend: Send + Sync + 'static {
    async fn status(&self) -> Result<Status, AdminError>;

    /// The volume's current config (as this gateway last learned it from the
    /// authority; a backend may re-read it first).
    async fn config(&self) -> Result<CacheConfig, AdminError>;

    /// The limits a config must respect (stripe unit, cache item size of
    /// the nodes in `nodes`).
    async fn limits(&self, nodes: &[String]) -> Limits;

    /// Make `proposed` the volume's config. `proposed.epoch` is the epoch the
    /// change was computed from; the backend installs it as `epoch + 1` by
    /// compare-and-set, returning `Conflict` if the volume moved on meanwhile.
    /// Returns the config now in force.
    async fn apply_config(&self, proposed: CacheConfig) -> Result<CacheConfig, AdminError>;

    /// Per-node health and counters (the same list as in `status`).
    async fn cache_nodes(&self) -> Result<Vec<NodeStatus>, AdminError> {
        Ok(self.status().await?.cache_nodes)
    }

    /// Drop every item of the bank (and unfence fenced nodes).
    async fn flush(&self) -> Result<FlushReport, AdminError>;

    /// What `/metrics` serves. A gateway answers from its own registry; the
    /// default, the process-wide registry, is for backends that keep none
    /// (tests).
    fn metrics(&self) -> Vec<prometheus::proto::MetricFamily> {
        prometheus::gather()
    }
}
