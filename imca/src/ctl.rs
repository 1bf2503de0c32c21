//! `imca ctl`: the admin API for humans. Tables for people, `--json` for
//! scripts; every change goes through the gateway's admin API, so the same
//! validation and cluster-wide rollout apply as for any other client.
//!
//! ```text
//!  imca ctl ──HTTP/1.1 (admin::client)──> gateway admin API ──> storage servers (epoch+1)
//! ```
//!
//! Which gateway: `--admin URL`, else `$IMCA_ADMIN`, else the `admin` entry of
//! `--cluster FILE` (the `cluster.json` that `imca up` writes), else
//! `./imca-data/cluster.json`.
//!
//! Which token (changes always need one; reads on loopback do not):
//! `--token-file FILE`, else `$IMCA_ADMIN_TOKEN`, else the file named by the
//! cluster file's `admin_token_file` (`imca up` writes `DIR/admin.token`,
//! mode 0600). The cluster file is only used for the token when it is also
//! where the gateway came from, or given with `--cluster`: a token is never
//! sent to another cluster's gateway.

mod prometheus;
mod show;

use admin::client::Client;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use volume::CacheConfig;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Admin API of a gateway, e.g. http://127.0.0.1:9470
    #[arg(long, env = "IMCA_ADMIN", global = true)]
    admin: Option<String>,
    /// cluster.json written by `imca up` (gives the admin URL and the metrics endpoints)
    #[arg(long, global = true)]
    cluster: Option<PathBuf>,
    /// File holding the admin token (default: $IMCA_ADMIN_TOKEN, else the
    /// token file named in the cluster file); changes need it
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the API's JSON instead of tables
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Pipeline, storage servers, cache nodes, hit ratios, epoch
    Status,
    /// Show the volume's cache configuration
    Config,
    /// Set the data block size (e.g. 4096, 4k, 64KiB), live on the whole cluster
    BlockSize { size: String },
    /// Set the placement: consistent, crc32 or modulo
    Placement { placement: String },
    /// Set the bank timeout in milliseconds
    Timeout { ms: u64 },
    /// Set the config lease in milliseconds
    Lease { ms: u64 },
    /// List the cache-node pool, or add / remove a node
    CacheNodes {
        #[command(subcommand)]
        action: Option<NodesCmd>,
    },
    /// Drop every item of the bank
    Flush,
    /// The options table (name, type, range, default, description)
    Options,
    /// Print a Prometheus scrape config for the cluster in --cluster (or ./imca-data/cluster.json)
    PrometheusConfig {
        /// Write to this file instead of stdout
        #[arg(long)]
        out: Option<PathBuf>,
        /// scrape_interval
        #[arg(long, default_value = "5s")]
        interval: String,
    },
    /// Print the API's OpenAPI document
    Openapi,
}

#[derive(clap::Subcommand, Debug)]
enum NodesCmd {
    /// List the pool (the default)
    List,
    /// Add a node (it must answer memcached's `version`)
    Add { addr: String },
    /// Remove a node
    #[command(alias = "remove")]
    Rm { addr: String },
}

const DEFAULT_CLUSTER: &str = "imca-data/cluster.json";

pub fn main(args: Args) -> anyhow::Result<()> {
    if let Cmd::PrometheusConfig { out, interval } = &args.cmd {
        let cluster = read_cluster(&cluster_path(&args)?)?;
        let yml = prometheus::scrape_config(&cluster, interval)?;
        match out {
            Some(p) => std::fs::write(p, yml).with_context(|| format!("writing {}", p.display()))?,
            None => print!("{yml}"),
        }
        return Ok(());
    }
    let c = client(&args)?;
    let json = args.json;
    let put = |body: serde_json::Value| -> anyhow::Result<()> {
        let cfg: CacheConfig = c.send("PUT", "/api/v1/config", &body)?;
        show::config_changed(&cfg, json);
        Ok(())
    };
    match args.cmd {
        Cmd::Status => {
            let v: serde_json::Value = c.get("/api/v1/status")?;
            if json {
                println!("{v:#}");
            } else {
                print!("{}", show::status(&serde_json::from_value(v)?));
            }
        }
        Cmd::Config => {
            let cfg: CacheConfig = c.get("/api/v1/config")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&cfg)?);
            } else {
                print!("{}", show::config(&cfg));
            }
        }
        Cmd::BlockSize { size } => put(serde_json::json!({ "block_size": parse_size(&size)? }))?,
        Cmd::Placement { placement } => put(serde_json::json!({ "placement": placement.to_lowercase() }))?,
        Cmd::Timeout { ms } => put(serde_json::json!({ "timeout_ms": ms }))?,
        Cmd::Lease { ms } => put(serde_json::json!({ "lease_ms": ms }))?,
        Cmd::CacheNodes { action } => match action.unwrap_or(NodesCmd::List) {
            NodesCmd::List => {
                let v: serde_json::Value = c.get("/api/v1/cache-nodes")?;
                if json {
                    println!("{v:#}");
                } else {
                    print!("{}", show::nodes(&serde_json::from_value::<Vec<admin::NodeStatus>>(v)?));
                }
            }
            NodesCmd::Add { addr } => {
                let cfg: CacheConfig = c.send("POST", "/api/v1/cache-nodes", &serde_json::json!({ "addr": addr }))?;
                show::config_changed(&cfg, json);
            }
            NodesCmd::Rm { addr } => {
                let cfg: CacheConfig = c.send("DELETE", "/api/v1/cache-nodes", &serde_json::json!({ "addr": addr }))?;
                show::config_changed(&cfg, json);
            }
        },
        Cmd::Flush => {
            let r: admin::FlushReport = c.send("POST", "/api/v1/cache/flush", &serde_json::json!({}))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", show::flush(&r));
            }
        }
        Cmd::Options => {
            let v: Vec<serde_json::Value> = c.get("/api/v1/options")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", show::options(&v));
            }
        }
        Cmd::Openapi => {
            let v: serde_json::Value = c.get("/api/v1/openapi.json")?;
            println!("{v:#}");
        }
        Cmd::PrometheusConfig { .. } => unreachable!("handled above"),
    }
    Ok(())
}

fn client(args: &Args) -> anyhow::Result<Client> {
    // the cluster file, when it names the gateway or was given by hand
    let cluster = match (&args.admin, &args.cluster) {
        (Some(_), None) => None,
        _ => {
            let path = cluster_path(args)?;
            Some((read_cluster(&path)?, path))
        }
    };
    let url = match (&args.admin, &cluster) {
        (Some(u), _) => u.clone(),
        (None, Some((c, path))) => {
            admin_url(c).with_context(|| format!("{} names no admin API; pass --admin URL", path.display()))?
        }
        (None, None) => unreachable!("no --admin means a cluster file"),
    };
    let token = match admin::auth::load_token(args.token_file.as_deref())? {
        Some(t) => Some(t),
        None => cluster.as_ref().and_then(|(c, path)| cluster_token(c, path)),
    };
    Ok(Client::new(&url, token)?)
}

/// The token in the file a cluster.json names (relative to it if relative).
/// One that cannot be read (another user's cluster) is reported, and the
/// request goes without: reads on loopback need none, and a change gets the
/// gateway's 401 saying what to do.
fn cluster_token(cluster: &serde_json::Value, path: &Path) -> Option<String> {
    let candidates = [&cluster["admin_token_file"], &cluster["gateway"]["admin_token_file"], &cluster["gateways"][0]["admin_token_file"]];
    let file = candidates.into_iter().find_map(|v| v.as_str())?;
    let file = path.parent().unwrap_or(Path::new(".")).join(file);
    match admin::auth::read_token_file(&file) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("imca ctl: {e} (named in {}); going without a token", path.display());
            None
        }
    }
}

fn cluster_path(args: &Args) -> anyhow::Result<PathBuf> {
    match &args.cluster {
        Some(p) => Ok(p.clone()),
        None if Path::new(DEFAULT_CLUSTER).exists() => Ok(PathBuf::from(DEFAULT_CLUSTER)),
        None => bail!("which gateway? pass --admin URL (or set IMCA_ADMIN) or --cluster DIR/cluster.json"),
    }
}

pub(crate) fn read_cluster(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The admin URL in a cluster.json: `admin`, or the first gateway's `admin`.
fn admin_url(cluster: &serde_json::Value) -> Option<String> {
    let candidates = [&cluster["admin"], &cluster["gateway"]["admin"], &cluster["gateways"][0]["admin"]];
    let s = candidates.into_iter().find_map(|v| v.as_str())?;
    Some(if s.starts_with("http://") { s.to_string() } else { format!("http://{s}") })
}

/// "4096", "4k", "4K", "4KiB", "64kb", "1m" → bytes (binary multiples).
pub(crate) fn parse_size(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().with_context(|| format!("{s:?} is not a size (e.g. 4096, 4k, 64KiB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        _ => bail!("{s:?}: unknown unit {unit:?} (use k or m)"),
    };
    n.checked_mul(mult).with_context(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert!(parse_size("4x").is_err());
        assert!(parse_size("k").is_err());
    }

    #[test]
    fn admin_url_from_cluster_json() {
        let c = serde_json::json!({"admin": "127.0.0.1:9470"});
        assert_eq!(admin_url(&c).unwrap(), "http://127.0.0.1:9470");
        let c = serde_json::json!({"gateways": [{"admin": "http://h:1"}]});
        assert_eq!(admin_url(&c).unwrap(), "http://h:1");
        assert!(admin_url(&serde_json::json!({})).is_none());
    }

    #[test]
    fn token_from_the_file_cluster_json_names() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = dir.path().join("cluster.json");
        std::fs::write(dir.path().join("admin.token"), "t0k3n\n").unwrap();
        // relative to cluster.json, or absolute
        assert_eq!(cluster_token(&serde_json::json!({"admin_token_file": "admin.token"}), &cluster).unwrap(), "t0k3n");
        let abs = dir.path().join("admin.token");
        assert_eq!(cluster_token(&serde_json::json!({"admin_token_file": abs}), &cluster).unwrap(), "t0k3n");
        assert!(cluster_token(&serde_json::json!({"admin_token_file": "missing"}), &cluster).is_none());
        assert!(cluster_token(&serde_json::json!({"admin": "h:1"}), &cluster).is_none());
    }
}
