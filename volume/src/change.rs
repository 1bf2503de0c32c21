//! The one path every change to the config takes before it is installed:
//! the whole proposed config is validated against the cluster's limits,
//! then every node that joins the pool must answer. The admin API (every
//! PUT / POST / DELETE) and `imca mount --cache-nodes` ([`install_nodes`])
//! both go through it; what passes is installed by [`crate::rollout`].
//!
//! ```text
//!  ConfigUpdate::merge(current) ─> admit: validate(next, limits) ─> probe joining nodes ─> rollout
//! ```

use crate::rollout::{self, VolumeServers};
use crate::{probe, validate, CacheConfig, ConfigUpdate, Error, Limits};

/// Check `next`, computed from `current`. `Ok(None)`: it changes nothing,
/// keep the epoch (no cold bank for nothing). `Ok(Some(next))`: it may be
/// installed. A refusal has touched nothing.
pub async fn admit(current: &CacheConfig, next: CacheConfig, limits: &Limits) -> Result<Option<CacheConfig>, Error> {
    validate(&next, limits)?;
    if next == *current {
        return Ok(None);
    }
    for n in next.nodes.iter().filter(|n| !current.nodes.contains(n)) {
        probe::reachable(n).await?;
    }
    Ok(Some(next))
}

/// `imca mount --cache-nodes`: make `nodes` the volume's pool, admitted
/// like a `PUT {"nodes": …}` through the admin API and installed by one
/// rollout (which bumps the epoch). Returns the config installed, or `None`
/// when the volume already uses exactly these nodes.
///
/// The limits hold the nodes' item limit but no stripe unit: the mount
/// changes only the pool, and a gateway whose stripe unit the volume's
/// block size does not divide still works (CMCache then serves no blocks
/// from the bank) — refusing to mount it would be new behaviour.
pub async fn install_nodes(servers: &dyn VolumeServers, nodes: &[String]) -> Result<Option<CacheConfig>, Error> {
    let cur = servers
        .get(0)
        .await
        .map_err(|e| Error::Unavailable(format!("cannot read the volume config from storage server 0: {e}")))?;
    let next = ConfigUpdate { nodes: Some(nodes.to_vec()), ..Default::default() }.merge(&cur)?;
    let limits = probe::limits(None, &next.nodes).await;
    let Some(next) = admit(&cur, next, &limits).await? else {
        return Ok(None);
    };
    let r = rollout::rollout(servers, next).await?;
    tracing::info!(epoch = r.installed.epoch, nodes = ?r.installed.nodes, "installed the cache nodes given at start");
    Ok(Some(r.installed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::SetOutcome;
    use crate::Invalid;
    use async_trait::async_trait;
    use std::sync::Mutex;

    /// One in-memory storage server, held to the real rule (exactly + 1).
    #[derive(Default)]
    struct OneServer(Mutex<CacheConfig>);

    #[async_trait]
    impl VolumeServers for OneServer {
        fn addrs(&self) -> Vec<String> {
            vec!["s0:1".into()]
        }
        async fn get(&self, _: usize) -> Result<CacheConfig, String> {
            Ok(self.0.lock().unwrap().clone())
        }
        async fn propose(&self, _: usize, new: &CacheConfig) -> Result<SetOutcome, String> {
            let mut g = self.0.lock().unwrap();
            if crate::acceptable(&g, new).is_err() {
                return Ok(SetOutcome::Stale(g.clone()));
            }
            *g = new.clone();
            Ok(SetOutcome::Installed)
        }
    }

    /// A real `imca cache-node`, in this process, for as long as the test runs.
    async fn live_node() -> String {
        let node = cache_node::start(cache_node::Config { threads: 1, ..cache_node::Config::local() }).await.unwrap();
        let addr = node.addr.to_string();
        std::mem::forget(node);
        addr
    }

    fn dead_addr() -> String {
        format!("127.0.0.1:{}", testkit_procs::free_port())
    }

    #[tokio::test]
    async fn invalid_unchanged_and_unreachable() {
        let cur = CacheConfig::default();
        let bad = CacheConfig { block_size: 3000, ..cur.clone() };
        assert!(matches!(admit(&cur, bad, &Limits::default()).await, Err(Error::Invalid(Invalid { field: "block_size", .. }))));
        assert_eq!(admit(&cur, cur.clone(), &Limits::default()).await, Ok(None));
        let dead = dead_addr();
        let joins = CacheConfig { nodes: vec![dead.clone()], ..cur.clone() };
        match admit(&cur, joins, &Limits::default()).await {
            Err(Error::Invalid(Invalid { field: "addr", message })) => {
                assert!(message.contains("unreachable") && message.contains(&dead), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // Nodes already in the pool are not probed again (a leaving node,
        // or a change of another option, must not wait on them).
        let held = CacheConfig { nodes: vec![dead], ..cur };
        let longer = CacheConfig { lease_ms: 2000, ..held.clone() };
        assert!(admit(&held, longer, &Limits::default()).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn cache_nodes_given_at_mount_are_admitted_like_an_admin_change() {
        let s = OneServer::default();
        // refused: malformed, twice, unreachable — and nothing installed
        let dead = dead_addr();
        for (nodes, field) in [(vec!["no-port".to_string()], "addr"), (vec![dead.clone()], "addr")] {
            match install_nodes(&s, &nodes).await {
                Err(Error::Invalid(i)) => assert_eq!(i.field, field, "{nodes:?}: {i}"),
                other => panic!("{nodes:?}: {other:?}"),
            }
        }
        let live = live_node().await;
        let twice = vec![live.clone(), live.clone()];
        assert!(matches!(install_nodes(&s, &twice).await, Err(Error::Invalid(Invalid { field: "nodes", .. }))));
        assert_eq!(s.get(0).await.unwrap().epoch, 1, "refusals changed nothing");
        // accepted: one rollout, one epoch; the same pool again changes nothing
        let installed = install_nodes(&s, std::slice::from_ref(&live)).await.unwrap().unwrap();
        assert_eq!((installed.epoch, installed.nodes.clone()), (2, vec![live.clone()]));
        assert_eq!(install_nodes(&s, &[live]).await.unwrap(), None);
        assert_eq!(s.get(0).await.unwrap().epoch, 2);
    }
}
