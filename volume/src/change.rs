//! The one path every change to the config takes before it is installed:
//! the whole proposed config is validated against the cluster's limits,
//! then every node that joins the pool must answer. The admin API (every
//! PUT / POST / DELETE) and `imca mount --cache-nodes` both go through it;
//! what passes is installed by [`crate::rollout`].
//!
//! ```text
//!  ConfigUpdate::merge(current) ─> admit: validate(next, limits) ─> probe joining nodes ─> rollout
//! ```

use crate::{probe, validate, CacheConfig, Error, Limits};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Invalid;

    fn dead_addr() -> String {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string()
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
}
