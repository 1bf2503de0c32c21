//! A change to the config as a value: every field optional, absent fields
//! keep their value (`PUT /api/v1/config`'s body, `imca mount
//! --cache-nodes`). Merging it gives the proposed config, which is then
//! checked whole ([`crate::validate`]).

use crate::{CacheConfig, Error, Invalid, Placement};
use serde::{Deserialize, Serialize};

/// A client may send back what it read: `epoch` then acts as
/// compare-and-set and `volume` must be unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigUpdate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// nodes kept out of the pool (see [`crate::fence`]); an operator may
    /// clear it, and a node listed in `nodes` leaves it
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

impl ConfigUpdate {
    /// The config that results from applying this update to `current`; the
    /// epoch stays `current.epoch` (installing it bumps it: [`crate::rollout`]).
    pub fn merge(&self, current: &CacheConfig) -> Result<CacheConfig, Error> {
        if let Some(e) = self.epoch {
            if e != current.epoch {
                return Err(Error::Conflict(format!(
                    "config changed meanwhile: request is based on epoch {e}, volume is at epoch {}",
                    current.epoch
                )));
            }
        }
        if let Some(v) = &self.volume {
            if *v != current.volume {
                return Err(Invalid::new("volume", format!("volume name is fixed (\"{}\")", current.volume)).into());
            }
        }
        let mut next = current.clone();
        if let Some(f) = &self.fenced {
            next.fenced = f.clone();
        }
        if let Some(n) = &self.nodes {
            next.nodes = n.clone();
            if self.fenced.is_none() {
                // readmitting a fenced node by hand (a new epoch makes
                // whatever it still holds unreadable)
                next.fenced.retain(|f| !n.contains(f));
            }
        }
        if let Some(b) = self.block_size {
            next.block_size = b;
        }
        if let Some(p) = self.placement {
            next.placement = p;
        }
        if let Some(t) = self.timeout_ms {
            next.timeout_ms = t;
        }
        if let Some(l) = self.lease_ms {
            next.lease_ms = l;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_absent_fields_and_checks_epoch_and_volume() {
        let cur = CacheConfig { epoch: 7, ..Default::default() };
        let up = ConfigUpdate { block_size: Some(4096), ..Default::default() };
        let next = up.merge(&cur).unwrap();
        assert_eq!(next.block_size, 4096);
        assert_eq!(next.epoch, 7);
        assert_eq!(next.placement, cur.placement);
        let stale = ConfigUpdate { epoch: Some(6), ..Default::default() };
        assert!(matches!(stale.merge(&cur), Err(Error::Conflict(_))));
        let rename = ConfigUpdate { volume: Some("other".into()), ..Default::default() };
        assert!(matches!(rename.merge(&cur), Err(Error::Invalid(Invalid { field: "volume", .. }))));
    }

    #[test]
    fn listing_a_fenced_node_readmits_it() {
        let cur = CacheConfig { nodes: vec!["a:1".into()], fenced: vec!["b:1".into()], ..Default::default() };
        let up = ConfigUpdate { nodes: Some(vec!["a:1".into(), "b:1".into()]), ..Default::default() };
        let next = up.merge(&cur).unwrap();
        assert!(next.fenced.is_empty());
        crate::validate(&next, &crate::Limits::UNKNOWN).unwrap();
    }
}
