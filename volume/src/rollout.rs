//! Installing a new volume config on every storage server, in an order that
//! keeps one source of truth.
//!
//! Server 0 is the authority: a change exists once server 0 has accepted it
//! as epoch `base + 1` (a server refuses an epoch that is not newer than its
//! own, so this is a compare-and-set on the epoch). Two gateways changing
//! the config at once therefore cannot both win; the loser gets 409 and
//! nothing of its change is anywhere. The other servers are then brought to
//! the authority's config; one that cannot be reached now is brought up to
//! date later by [`repair`], which every gateway runs once per lease, so a
//! restarted or partitioned server converges without an operator.
//!
//! ```text
//!   rollout(proposed@e) ── CAS(e → e+1) ──> server 0  (commit point)
//!                        └─ set(e+1) ─────> server 1..S-1 (lagging ones: repair, every lease)
//! ```

use crate::{CacheConfig, Error};
use async_trait::async_trait;

/// The answer of a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    Installed,
    /// the server's epoch was not the expected one; this is what it holds
    Stale(CacheConfig),
}

/// The storage servers of a volume, as far as their config is concerned.
/// Implemented by the gateway over the wire protocol (GetVolumeConfig /
/// SetVolumeConfig); implementations put their own timeout on each call.
#[async_trait]
pub trait VolumeServers: Send + Sync {
    fn addrs(&self) -> Vec<String>;
    async fn get(&self, server: usize) -> Result<CacheConfig, String>;
    /// Ask `server` to install `new` (SetVolumeConfig). A server accepts a
    /// config only if its epoch is newer than the one it holds (see `wire`),
    /// so two changes computed from the same epoch cannot both be accepted.
    async fn propose(&self, server: usize, new: &CacheConfig) -> Result<SetOutcome, String>;
    /// `get`, plus the cache nodes the server asks to have fenced
    /// (see [`crate::fence`]).
    async fn get_with_fences(&self, server: usize) -> Result<(CacheConfig, Vec<String>), String> {
        Ok((self.get(server).await?, Vec::new()))
    }
}

/// What a rollout did.
#[derive(Clone, Debug, PartialEq)]
pub struct Rollout {
    pub installed: CacheConfig,
    /// servers that do not hold it yet (address, why); `repair` will retry
    pub lagging: Vec<(String, String)>,
    /// cache nodes the servers asked to have fenced (`repair` only)
    pub fence_wanted: Vec<String>,
}

/// Install `proposed` (computed from epoch `proposed.epoch`) as epoch + 1.
pub async fn rollout(servers: &dyn VolumeServers, proposed: CacheConfig) -> Result<Rollout, Error> {
    let addrs = servers.addrs();
    if addrs.is_empty() {
        return Err(Error::Internal("volume has no storage servers".into()));
    }
    let base = proposed.epoch;
    let next = CacheConfig { epoch: base + 1, ..proposed };
    match servers.propose(0, &next).await {
        Ok(SetOutcome::Installed) => {}
        Ok(SetOutcome::Stale(cur)) => {
            return Err(Error::Conflict(format!(
                "config changed meanwhile: change was based on epoch {base}, the authority ({}) is at epoch {}; \
                 nothing was changed, re-read and retry",
                addrs[0], cur.epoch
            )))
        }
        Err(e) => {
            return Err(Error::Unavailable(format!(
                "the authority for the volume config, storage server 0 ({}), did not accept the change: {e}; \
                 nothing was changed",
                addrs[0]
            )))
        }
    }
    let mut lagging = Vec::new();
    for (i, addr) in addrs.iter().enumerate().skip(1) {
        if let Err(e) = bring_up_to_date(servers, i, &next).await {
            tracing::warn!(server = %addr, epoch = next.epoch, error = %e, "server did not take the new config yet");
            lagging.push((addr.clone(), e));
        }
    }
    Ok(Rollout { installed: next, lagging, fence_wanted: Vec::new() })
}

/// Bring every server to the authority's config; returns the authority's
/// config and the servers still lagging. Cheap when nothing lags: one read
/// per server.
pub async fn repair(servers: &dyn VolumeServers) -> Result<Rollout, Error> {
    let addrs = servers.addrs();
    let (auth, mut fence_wanted) = servers
        .get_with_fences(0)
        .await
        .map_err(|e| Error::Unavailable(format!("storage server 0 ({}) is unreachable: {e}", addrs[0])))?;
    let mut lagging = Vec::new();
    for (i, addr) in addrs.iter().enumerate().skip(1) {
        let r = match servers.get_with_fences(i).await {
            Ok((c, fences)) => {
                fence_wanted.extend(fences);
                if c.epoch >= auth.epoch {
                    Ok(())
                } else {
                    bring_up_to_date(servers, i, &auth).await
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            lagging.push((addr.clone(), e));
        }
    }
    fence_wanted.sort();
    fence_wanted.dedup();
    Ok(Rollout { installed: auth, lagging, fence_wanted })
}

/// Install `target` on server `i` (a lagging server); a server already past
/// `target` is left alone (a newer change reached it first).
pub async fn repair_server(servers: &dyn VolumeServers, i: usize, target: &CacheConfig) -> Result<(), String> {
    bring_up_to_date(servers, i, target).await
}

async fn bring_up_to_date(servers: &dyn VolumeServers, i: usize, target: &CacheConfig) -> Result<(), String> {
    match servers.propose(i, target).await? {
        SetOutcome::Installed => Ok(()),
        SetOutcome::Stale(cur) if cur.epoch >= target.epoch => Ok(()),
        SetOutcome::Stale(cur) => Err(format!(
            "server holds epoch {} and refused epoch {} (invalid there?)",
            cur.epoch, target.epoch
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// In-memory servers; they accept any newer epoch.
    struct Fake {
        cfgs: Mutex<Vec<Option<CacheConfig>>>, // None = down
        calls: Mutex<Vec<usize>>,
    }

    impl Fake {
        fn new(n: usize) -> Fake {
            Fake { cfgs: Mutex::new(vec![Some(CacheConfig::default()); n]), calls: Mutex::default() }
        }
        fn epochs(&self) -> Vec<Option<u64>> {
            self.cfgs.lock().unwrap().iter().map(|c| c.as_ref().map(|c| c.epoch)).collect()
        }
    }

    #[async_trait]
    impl VolumeServers for Fake {
        fn addrs(&self) -> Vec<String> {
            (0..self.cfgs.lock().unwrap().len()).map(|i| format!("s{i}:1")).collect()
        }
        async fn get(&self, i: usize) -> Result<CacheConfig, String> {
            self.cfgs.lock().unwrap()[i].clone().ok_or_else(|| "down".into())
        }
        async fn propose(&self, i: usize, new: &CacheConfig) -> Result<SetOutcome, String> {
            self.calls.lock().unwrap().push(i);
            let mut g = self.cfgs.lock().unwrap();
            let cur = g[i].as_mut().ok_or("down")?;
            if new.epoch <= cur.epoch {
                return Ok(SetOutcome::Stale(cur.clone()));
            }
            *cur = new.clone();
            Ok(SetOutcome::Installed)
        }
    }

    fn proposed(block: u32) -> CacheConfig {
        CacheConfig { block_size: block, ..Default::default() }
    }

    #[tokio::test]
    async fn authority_first_then_the_rest() {
        let f = Fake::new(3);
        let r = rollout(&f, proposed(4096)).await.unwrap();
        assert_eq!(r.installed.epoch, 2);
        assert!(r.lagging.is_empty());
        assert_eq!(f.epochs(), vec![Some(2); 3]);
        assert_eq!(f.calls.lock().unwrap()[0], 0, "server 0 is asked first");
    }

    #[tokio::test]
    async fn a_stale_change_is_refused_and_changes_nothing() {
        let f = Fake::new(2);
        rollout(&f, proposed(4096)).await.unwrap();
        // A second gateway computed its change from epoch 1 too.
        let e = rollout(&f, proposed(1024)).await.unwrap_err();
        assert!(matches!(e, Error::Conflict(_)), "{e:?}");
        assert_eq!(f.get(1).await.unwrap().block_size, 4096);
    }

    #[tokio::test]
    async fn authority_down_means_unavailable_and_nothing_changed() {
        let f = Fake::new(2);
        f.cfgs.lock().unwrap()[0] = None;
        assert!(matches!(rollout(&f, proposed(4096)).await, Err(Error::Unavailable(_))));
        assert_eq!(f.epochs(), vec![None, Some(1)]);
    }

    #[tokio::test]
    async fn a_lagging_server_is_repaired_later() {
        let f = Fake::new(3);
        let saved = f.cfgs.lock().unwrap()[2].take();
        let r = rollout(&f, proposed(4096)).await.unwrap();
        assert_eq!(r.lagging.len(), 1);
        let r = rollout(&f, CacheConfig { epoch: 2, ..proposed(1024) }).await.unwrap();
        assert_eq!(r.lagging.len(), 1);
        f.cfgs.lock().unwrap()[2] = saved; // comes back with the old config, two epochs behind
        let r = repair(&f).await.unwrap();
        assert!(r.lagging.is_empty());
        assert_eq!(f.epochs(), vec![Some(3); 3]);
        assert_eq!(f.get(2).await.unwrap().block_size, 1024);
    }
}
