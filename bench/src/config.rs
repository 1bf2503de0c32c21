//! What every result states about the system it measured: the target
//! directory and its file system, and — for an IMCa mount whose gateway's
//! admin API is named (`--admin URL` or `--cluster cluster.json`) — block
//! size, cache nodes, placement, transport and storage servers, as the
//! gateway reports them in `GET /api/v1/status`. Anything not known is
//! "unknown", and the command line can state it (`--block-size 2048
//! --nodes 4 …`) for mounts that have no admin API (GlusterFS, a local
//! directory).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How the target was configured (strings: shown as given, never computed with).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct System {
    pub target: PathBuf,
    /// the file system type of the mount holding the target (`fuse.imca`, `ext4`, …)
    pub fs_type: String,
    pub block_size: String,
    pub nodes: String,
    pub placement: String,
    pub transport: String,
    pub storage_servers: String,
}

/// Where to learn the system's configuration and what the user states.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SystemArgs {
    /// The gateway's admin API (e.g. http://127.0.0.1:9470): block size,
    /// nodes, placement and transport are read from its status.
    #[arg(long, value_name = "URL")]
    pub admin: Option<String>,
    /// The cluster.json `imca up` wrote (gives the admin API).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// State the block size (for mounts without an admin API).
    #[arg(long, value_name = "SIZE")]
    pub block_size: Option<String>,
    /// State the number of cache nodes.
    #[arg(long, value_name = "N")]
    pub nodes: Option<String>,
    /// State the placement (crc32, modulo, consistent).
    #[arg(long)]
    pub placement: Option<String>,
    /// State the transport (tcp, rdma, …).
    #[arg(long)]
    pub transport: Option<String>,
}

const UNKNOWN: &str = "unknown";

impl SystemArgs {
    /// The configuration of the system behind `dir`. An admin API that was
    /// named but does not answer is an error (the run would state wrong
    /// facts otherwise); one that was not named leaves fields unknown.
    pub fn describe(&self, dir: &Path) -> anyhow::Result<System> {
        let mut s = System {
            target: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
            fs_type: fs_type(dir).unwrap_or_else(|| UNKNOWN.into()),
            block_size: UNKNOWN.into(),
            nodes: UNKNOWN.into(),
            placement: UNKNOWN.into(),
            transport: UNKNOWN.into(),
            storage_servers: UNKNOWN.into(),
        };
        if let Some(url) = self.admin_url()? {
            let status: serde_json::Value = admin::client::Client::new(&url, None)
                .map_err(|e| anyhow::anyhow!("admin API {url}: {e}"))?
                .get("/api/v1/status")
                .map_err(|e| anyhow::anyhow!("admin API {url}: status: {e}"))?;
            let cfg = &status["config"];
            s.block_size = cfg["block_size"].as_u64().map(|b| b.to_string()).unwrap_or(s.block_size);
            s.nodes = cfg["nodes"].as_array().map(|n| n.len().to_string()).unwrap_or(s.nodes);
            s.placement = cfg["placement"].as_str().map(String::from).unwrap_or(s.placement);
            s.transport = status["gateway"]["transport"].as_str().map(String::from).unwrap_or(s.transport);
            s.storage_servers =
                status["storage_servers"].as_array().map(|n| n.len().to_string()).unwrap_or(s.storage_servers);
        }
        let stated = [
            (&self.block_size, &mut s.block_size),
            (&self.nodes, &mut s.nodes),
            (&self.placement, &mut s.placement),
            (&self.transport, &mut s.transport),
        ];
        for (given, field) in stated {
            if let Some(v) = given {
                *field = v.clone();
            }
        }
        Ok(s)
    }

    fn admin_url(&self) -> anyhow::Result<Option<String>> {
        if let Some(u) = &self.admin {
            return Ok(Some(u.clone()));
        }
        let Some(f) = &self.cluster else { return Ok(None) };
        let text = std::fs::read(f).map_err(|e| anyhow::anyhow!("reading {}: {e}", f.display()))?;
        let v: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", f.display()))?;
        match v["admin"].as_str() {
            Some(u) => Ok(Some(u.to_string())),
            None => anyhow::bail!("{} names no admin API", f.display()),
        }
    }
}

/// The type of the file system mounted deepest above `dir` (from
/// /proc/self/mountinfo: the longest mount point that is a prefix).
pub fn fs_type(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else { continue };
        let (Some(mnt), Some(ty)) = (fields.get(4), fields.get(sep + 1)) else { continue };
        let mnt = unescape(mnt);
        if dir.starts_with(&mnt) && best.as_ref().is_none_or(|(len, _)| mnt.len() >= *len) {
            best = Some((mnt.len(), ty.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_has_a_type_and_stated_values_win() {
        assert!(fs_type(Path::new("/")).is_some());
        let a = SystemArgs { block_size: Some("2048".into()), nodes: Some("4".into()), ..Default::default() };
        let s = a.describe(Path::new("/")).unwrap();
        assert_eq!((s.block_size.as_str(), s.nodes.as_str(), s.placement.as_str()), ("2048", "4", UNKNOWN));
    }

    #[test]
    fn a_cluster_file_without_admin_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("cluster.json");
        std::fs::write(&f, b"{\"mount\": \"/x\"}").unwrap();
        let a = SystemArgs { cluster: Some(f), ..Default::default() };
        assert!(a.describe(d.path()).unwrap_err().to_string().contains("no admin API"));
    }
}
