//! The gateway's side of the admin API: the [`admin::AdminBackend`] over
//! this gateway's graph and protocol-clients, the [`VolumeServers`] the
//! rollout and the config lease talk to, and starting both.
//!
//! ```text
//!  admin::serve ─> GatewayAdmin ─┬─ status: graph names, per-server GetVolumeConfig, node `stats`, metrics
//!                                ├─ apply_config: volume::rollout over StorageServers (server 0 first)
//!                                └─ flush: flush_all on every node
//!  protocol-client epoch stamps ─> volume::lease::ConfigLease ─> watch<Option<Arc<CacheConfig>>> ─> CMCache
//! ```

use admin::{AdminBackend, AdminError, FlushReport, GatewayInfo, NodeFlush, NodeStatus, OpHitRatio};
use admin::{BankBypass, ServerStatus, Status};
use async_trait::async_trait;
use protocol_client::ProtocolClient;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volume::lease::ConfigLease;
use volume::probe;
use volume::rollout::{self, SetOutcome, VolumeServers};
use volume::{CacheConfig, Limits};

/// Bound on one admin-initiated storage call (config read/set, status probe).
const ADMIN_CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on one cache-node `stats` / `flush_all`.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);

/// The volume's storage servers, in stripe order (server 0 is the authority).
pub struct StorageServers {
    clients: Vec<Arc<ProtocolClient>>,
    addrs: Vec<String>,
    /// the authority over a connection of the lease's own (`storage::lease_client`)
    lease: Option<Arc<ProtocolClient>>,
}

impl StorageServers {
    pub fn new(clients: Vec<Arc<ProtocolClient>>, addrs: Vec<String>) -> StorageServers {
        StorageServers { clients, addrs, lease: None }
    }

    /// Renew the config lease over `client` (none: server 0's leaf).
    pub fn with_lease_client(mut self, client: Option<Arc<ProtocolClient>>) -> StorageServers {
        self.lease = client;
        self
    }
}

async fn bounded<T>(f: impl Future<Output = xlator::FsResult<T>>) -> Result<T, String> {
    match tokio::time::timeout(ADMIN_CALL_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {ADMIN_CALL_TIMEOUT:?}")),
    }
}

#[async_trait]
impl VolumeServers for StorageServers {
    fn addrs(&self) -> Vec<String> {
        self.addrs.clone()
    }

    async fn get(&self, server: usize) -> Result<CacheConfig, String> {
        bounded(self.clients[server].fetch_volume_config()).await
    }

    async fn get_with_fences(&self, server: usize) -> Result<(CacheConfig, Vec<String>), String> {
        bounded(self.clients[server].fetch_volume_config_and_fences()).await
    }

    async fn renew(&self) -> Result<CacheConfig, String> {
        bounded(self.lease.as_ref().unwrap_or(&self.clients[0]).fetch_volume_config()).await
    }

    async fn propose(&self, server: usize, new: &CacheConfig) -> Result<SetOutcome, String> {
        let (accepted, cur) = bounded(self.clients[server].set_volume_config(new.clone())).await?;
        Ok(if accepted { SetOutcome::Installed } else { SetOutcome::Stale(cur) })
    }
}

/// Start the config lease over `servers` and feed it every reply's epoch
/// stamp. Needs server 0 to answer now.
pub async fn start_lease(
    servers: Arc<StorageServers>,
    registry: &prometheus::Registry,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<ConfigLease> {
    let lease = volume::lease::start(servers.clone(), shutdown).await?;
    let mut held = lease.subscribe();
    let gauges = ConfigGauges::register(registry);
    let bypass = BypassMetrics::register(registry);
    let read_bypass = lease.bypass_reader();
    tokio::spawn(async move {
        loop {
            gauges.set(held.borrow_and_update().as_deref());
            if let Some(b) = read_bypass() {
                bypass.set(&b);
            }
            if held.changed().await.is_err() {
                return;
            }
        }
    });
    for (i, c) in servers.clients.iter().enumerate() {
        let mut rx = c.epoch_watch();
        let l = lease.clone();
        // Ends when the client (and so the sender) is dropped.
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                let e = *rx.borrow_and_update();
                l.stamp(i, e);
            }
        });
    }
    Ok(lease)
}

/// `imca_gateway_config_{epoch,block_size_bytes,lease_valid}`: what this
/// gateway uses now (the dashboard's configuration row).
struct ConfigGauges([prometheus::IntGauge; 3]);

impl ConfigGauges {
    fn register(registry: &prometheus::Registry) -> ConfigGauges {
        let gauge = |name: &str, help: &str| {
            let g = metric_series::gauge(name, help);
            // Fails only for a duplicate name: one lease per gateway registry.
            let _ = registry.register(Box::new(g.clone()));
            g
        };
        ConfigGauges([
            gauge("imca_gateway_config_epoch", "Volume config epoch this gateway uses for cache keys"),
            gauge("imca_gateway_config_block_size_bytes", "Cache block size this gateway uses"),
            gauge("imca_gateway_config_lease_valid", "1 while the config lease is valid, 0 while the cache is bypassed"),
        ])
    }

    fn set(&self, held: Option<&CacheConfig>) {
        match held {
            Some(c) => {
                self.0[0].set(c.epoch as i64);
                self.0[1].set(c.block_size as i64);
                self.0[2].set(1);
            }
            None => self.0[2].set(0),
        }
    }
}

/// `imca_gateway_bank_bypassed`, `imca_gateway_bank_bypass_episodes_total`,
/// `imca_gateway_bank_bypassed_seconds_total`: when and for how long this
/// gateway ran without its bank (`volume::bypass`). The seconds of an
/// episode are counted when it ends.
struct BypassMetrics {
    now: prometheus::IntGauge,
    episodes: prometheus::IntCounter,
    seconds: prometheus::Counter,
}

impl BypassMetrics {
    fn register(registry: &prometheus::Registry) -> BypassMetrics {
        let m = BypassMetrics {
            now: metric_series::gauge("imca_gateway_bank_bypassed", "1 while this gateway bypasses the bank (its config lease ran out)"),
            episodes: metric_series::counter("imca_gateway_bank_bypass_episodes_total", "Times this gateway's config lease ran out and it bypassed the bank"),
            seconds: prometheus::Counter::new("imca_gateway_bank_bypassed_seconds_total", "Time this gateway bypassed the bank, counted as each episode ends")
                .expect("valid metric"),
        };
        // Fails only for a duplicate name: one lease per gateway registry.
        let _ = registry.register(Box::new(m.now.clone()));
        let _ = registry.register(Box::new(m.episodes.clone()));
        let _ = registry.register(Box::new(m.seconds.clone()));
        m
    }

    fn set(&self, b: &volume::bypass::Bypass) {
        self.now.set(i64::from(b.current.is_some()));
        self.episodes.inc_by(b.episodes.saturating_sub(self.episodes.get()));
        let ended = b.ended.as_secs_f64();
        if ended > self.seconds.get() {
            self.seconds.inc_by(ended - self.seconds.get());
        }
    }
}

fn bank_bypass(lease: &ConfigLease) -> BankBypass {
    let b = lease.bypass();
    BankBypass {
        active: b.current.is_some(),
        for_seconds: b.current.map(|d| d.as_secs_f64()),
        episodes: b.episodes,
        seconds_total: b.total.as_secs_f64(),
    }
}

/// Everything the admin API reports about or changes through this gateway.
pub struct GatewayAdmin {
    pub servers: Arc<StorageServers>,
    pub lease: ConfigLease,
    pub pipeline: Vec<String>,
    pub mountpoint: Option<PathBuf>,
    pub stripe_unit: u32,
    pub started: Instant,
    /// the bank uses nodes that serve requests without a login
    pub open_cache_nodes_allowed: bool,
    /// the gateway's registry: the bank's and CMCache's counters for
    /// `status`, and what the admin API's `/metrics` serves
    pub registry: prometheus::Registry,
}

#[async_trait]
impl AdminBackend for GatewayAdmin {
    async fn status(&self) -> Result<Status, AdminError> {
        // Server 0 unreachable: the config held, or (the lease ran out, the
        // bank bypassed: what status must show then) the last one read.
        let config = match self.config().await {
            Ok(c) => c,
            Err(_) => (*self.lease.current().unwrap_or_else(|| self.lease.last_read())).clone(),
        };
        let servers = futures::future::join_all(self.servers.clients.iter().zip(&self.servers.addrs).map(
            |(c, addr)| async move {
                let t0 = Instant::now();
                if let Some(down) = c.down_for() {
                    let error = format!("marked down {:.1} s ago (missed its deadline); calls fail at once until a probe gets an answer", down.as_secs_f64());
                    return ServerStatus { addr: addr.clone(), healthy: false, error: Some(error), ..Default::default() };
                }
                match bounded(c.fetch_volume_config()).await {
                    Ok(cfg) => ServerStatus {
                        addr: addr.clone(),
                        healthy: true,
                        epoch: Some(cfg.epoch),
                        latency_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
                        error: None,
                    },
                    Err(e) => ServerStatus { addr: addr.clone(), healthy: false, error: Some(e), ..Default::default() },
                }
            },
        ))
        .await;
        let families = self.registry.gather();
        let mut nodes = node_status(&families, &config.nodes).await;
        for mut f in node_status(&families, &config.fenced).await {
            f.fenced = true;
            nodes.push(f);
        }
        let held = self.lease.current();
        Ok(Status {
            volume: config.volume.clone(),
            epoch: held.map(|c| c.epoch).unwrap_or(0),
            gateway: GatewayInfo {
                version: env!("CARGO_PKG_VERSION").to_string(),
                mountpoint: self.mountpoint.as_ref().map(|p| p.display().to_string()),
                uptime_seconds: self.started.elapsed().as_secs(),
                transport: self.servers.clients.first().map(|c| c.describe()),
                open_cache_nodes_allowed: self.open_cache_nodes_allowed,
            },
            pipeline: self.pipeline.clone(),
            storage_servers: servers,
            cache_nodes: nodes,
            hit_ratio: op_hit_ratios(&families),
            bank_bypass: bank_bypass(&self.lease),
            heals: admin::Heals {
                pending: gauge(&families, "imca_gateway_heals_pending", &[]).unwrap_or(0).max(0) as u64,
                sweep_needed: gauge(&families, "imca_gateway_heal_sweep_needed", &[]).unwrap_or(0) > 0,
                given_up: counter(&families, "imca_gateway_heals_total", &[("result", "given_up")]),
            },
            config,
        })
    }

    /// Always the authority's current config, so a change is computed from
    /// the newest epoch (fewer 409s than using this gateway's lease).
    async fn config(&self) -> Result<CacheConfig, AdminError> {
        self.servers.get(0).await.map_err(|e| {
            AdminError::Unavailable(format!("storage server 0 ({}) is unreachable: {e}", self.servers.addrs[0]))
        })
    }

    /// This gateway's stripe unit, and the nodes' item limit.
    async fn limits(&self, nodes: &[String]) -> Limits {
        probe::limits(Some(self.stripe_unit), nodes).await
    }

    async fn apply_config(&self, proposed: CacheConfig) -> Result<CacheConfig, AdminError> {
        let r = rollout::rollout(self.servers.as_ref(), proposed).await?;
        for (addr, why) in &r.lagging {
            tracing::warn!(server = %addr, error = %why, epoch = r.installed.epoch,
                "storage server did not take the new config yet; gateways will repair it");
        }
        self.lease.publish(r.installed.clone());
        Ok(r.installed)
    }

    async fn flush(&self) -> Result<FlushReport, AdminError> {
        let cfg = self.config().await?;
        let nodes = futures::future::join_all(cfg.nodes.iter().map(|n| async move {
            match probe::memcached_flush_all(n, NODE_TIMEOUT).await {
                Ok(()) => NodeFlush { addr: n.clone(), ok: true, error: None },
                Err(e) => NodeFlush { addr: n.clone(), ok: false, error: Some(e.to_string()) },
            }
        }))
        .await;
        Ok(FlushReport { epoch: cfg.epoch, nodes })
    }

    fn metrics(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.registry.gather()
    }
}

/// Per node: its own `stats` (items, memory, evictions) and this gateway's
/// hits and misses on it (from the bank client's counters).
async fn node_status(families: &[prometheus::proto::MetricFamily], nodes: &[String]) -> Vec<NodeStatus> {
    futures::future::join_all(nodes.iter().map(|n| {
        let hits = counter(families, "imca_bank_requests_total", &[("node", n), ("op", "get"), ("result", "hit")]);
        let misses = counter(families, "imca_bank_requests_total", &[("node", n), ("op", "get"), ("result", "miss")]);
        async move {
            let mut s = NodeStatus {
                addr: n.clone(),
                hits,
                misses,
                hit_ratio: admin_ratio(hits, misses),
                login: gauge(families, "imca_bank_node_open", &[("node", n)])
                    .map(|open| if open == 1 { "none".into() } else { "required".into() }),
                ..Default::default()
            };
            match probe::memcached_stats(n, NODE_TIMEOUT).await {
                Ok(st) => {
                    let num = |k: &str| st.get(k).and_then(|v| v.parse::<u64>().ok());
                    s.healthy = true;
                    s.items = num("curr_items");
                    s.bytes = num("bytes");
                    s.limit_bytes = num("limit_maxbytes");
                    s.evictions = num("evictions");
                }
                Err(e) => s.error = Some(e.to_string()),
            }
            s
        }
    }))
    .await
}

fn admin_ratio(hits: u64, misses: u64) -> Option<f64> {
    let t = hits + misses;
    (t > 0).then(|| hits as f64 / t as f64)
}

/// Hits and misses per cached operation, from CMCache's counters
/// (`imca_gateway_cache_total{op,result}`; `bypass` is neither).
fn op_hit_ratios(f: &[prometheus::proto::MetricFamily]) -> Vec<OpHitRatio> {
    ["lookup", "getattr", "read"]
        .iter()
        .map(|op| {
            let h = counter(f, CACHE_METRIC, &[("op", op), ("result", "hit")]);
            let m = counter(f, CACHE_METRIC, &[("op", op), ("result", "miss")]);
            OpHitRatio::new(*op, h, m)
        })
        .collect()
}

const CACHE_METRIC: &str = "imca_gateway_cache_total";

/// The value of the first gauge series whose labels include all of `want`.
fn gauge(families: &[prometheus::proto::MetricFamily], name: &str, want: &[(&str, &str)]) -> Option<i64> {
    families
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric())
        .find(|m| want.iter().all(|(k, v)| m.get_label().iter().any(|l| l.name() == *k && l.value() == *v)))
        .map(|m| m.get_gauge().get_value() as i64)
}

/// Sum of a counter's series whose labels include all of `want`.
fn counter(families: &[prometheus::proto::MetricFamily], name: &str, want: &[(&str, &str)]) -> u64 {
    families
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric())
        .filter(|m| {
            want.iter().all(|(k, v)| m.get_label().iter().any(|l| l.name() == *k && l.value() == *v))
        })
        .map(|m| m.get_counter().get_value() as u64)
        .sum()
}

/// Bind the admin API on `addr` (refusing a non-loopback address without a
/// token) and serve it until `stopped`; returns its base URL.
pub async fn serve(
    addr: &str,
    auth: admin::Auth,
    backend: Arc<GatewayAdmin>,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<String> {
    use anyhow::Context;
    let sock: std::net::SocketAddr = tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("--admin {addr}"))?
        .next()
        .with_context(|| format!("--admin {addr}: no address"))?;
    admin::auth::check_exposure(sock, auth.token())?;
    let l = tokio::net::TcpListener::bind(sock).await.with_context(|| format!("binding the admin API on {addr}"))?;
    let url = format!("http://{}", l.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = admin::serve(l, backend, auth, stopped).await {
            tracing::error!(error = %e, "admin API stopped");
        }
    });
    Ok(url)
}
