//! Installing a new volume config on every storage server, in an order that
//! keeps one source of truth.
//!
//! Server 0 is the authority: a change exists once server 0 has accepted it
//! as epoch `base + 1` (a server accepts only exactly its own epoch + 1, so
//! this is a compare-and-set on the epoch). Two gateways changing
//! the config at once therefore cannot both win; the loser gets 409 and
//! nothing of its change is anywhere. The other servers are then brought to
//! the authority's config; one that cannot be reached now is brought up to
//! date later by [`repair`], which every gateway runs once per lease, so a
//! restarted or partitioned server converges without an operator.
//!
//! ```text
//!   rollout(proposed@e) ── CAS(e → e+1) ──> server 0  (commit point)
//!                        └─ set(e+1) ─────> server 1..S-1 (lagging ones: repair, every lease)
//!   repair: server k at epoch j < e+1 ── set(j+1), set(j+2), … set(e+1), each with the authority's config
//! ```
//!
//! A server that missed several changes cannot take the authority's epoch
//! in one jump (that rule is what stops a proposal of epoch 2^64-1 from
//! ending every later change): it is stepped forward one epoch at a time,
//! each step carrying the authority's config. The epochs in between hold a
//! config that server 0 never had under them; no gateway reads them (the
//! gateways hold server 0's epoch), and the sooner the lagging server uses
//! the authority's cache nodes, the sooner its deletes reach the right bank.
//! The steps are also what another gateway repairing the same server at the
//! same moment sees: a step it lost to is simply skipped.

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
    /// config only if its epoch is exactly the one it holds + 1
    /// ([`crate::acceptable`]), so two changes computed from the same epoch
    /// cannot both be accepted.
    async fn propose(&self, server: usize, new: &CacheConfig) -> Result<SetOutcome, String>;
    /// `get`, plus the cache nodes the server asks to have fenced
    /// (see [`crate::fence`]).
    async fn get_with_fences(&self, server: usize) -> Result<(CacheConfig, Vec<String>), String> {
        Ok((self.get(server).await?, Vec::new()))
    }
    /// The authority's config for the gateway's lease (`crate::lease`):
    /// `get(0)`, over a connection of its own where there is one, so a
    /// renewal never queues behind bulk data.
    async fn renew(&self) -> Result<CacheConfig, String> {
        self.get(0).await
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
    let Some(epoch) = base.checked_add(1) else {
        return Err(Error::Internal(format!("epoch {base} is the largest there is; no change can follow it")));
    };
    let next = CacheConfig { epoch, ..proposed };
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

/// Install `target` on server `i` (a lagging server), stepping it forward
/// one epoch at a time if it is several behind; a server already past
/// `target` is left alone (a newer change reached it first).
pub async fn repair_server(servers: &dyn VolumeServers, i: usize, target: &CacheConfig) -> Result<(), String> {
    bring_up_to_date(servers, i, target).await
}

/// At most this many one-epoch steps per repair of one server: a server
/// thousands of changes behind is brought up over several repairs (one per
/// lease) rather than holding one repair for thousands of round trips.
pub const MAX_STEPS: u64 = 1024;

async fn bring_up_to_date(servers: &dyn VolumeServers, i: usize, target: &CacheConfig) -> Result<(), String> {
    // The common case (the server is at target - 1) is one round trip.
    let mut at = match servers.propose(i, target).await? {
        SetOutcome::Installed => return Ok(()),
        SetOutcome::Stale(cur) => cur.epoch,
    };
    let mut steps = 0;
    while at < target.epoch {
        if steps == MAX_STEPS {
            return Err(format!("server is still at epoch {at}, {} behind; continuing at the next repair", target.epoch - at));
        }
        steps += 1;
        let step = CacheConfig { epoch: at + 1, ..target.clone() };
        match servers.propose(i, &step).await? {
            SetOutcome::Installed => at = step.epoch,
            // someone else (another gateway's repair) stepped it meanwhile
            SetOutcome::Stale(cur) if cur.epoch > at => at = cur.epoch,
            SetOutcome::Stale(cur) => {
                return Err(format!("server holds epoch {} and refused epoch {} (invalid there?)", cur.epoch, step.epoch))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// In-memory servers, held to the real rule (exactly + 1).
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
            if crate::acceptable(cur, new).is_err() {
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

    #[tokio::test]
    async fn a_server_far_behind_is_stepped_up_over_several_repairs() {
        let f = Fake::new(2);
        let behind = MAX_STEPS + 10;
        f.cfgs.lock().unwrap()[0] = Some(CacheConfig { epoch: 1 + behind, ..proposed(4096) });
        let r = repair(&f).await.unwrap();
        assert_eq!(r.lagging.len(), 1, "a bounded number of steps per repair");
        assert_eq!(f.epochs()[1], Some(1 + MAX_STEPS));
        let r = repair(&f).await.unwrap();
        assert!(r.lagging.is_empty());
        assert_eq!(f.get(1).await.unwrap(), f.get(0).await.unwrap());
    }

    #[tokio::test]
    async fn a_jump_is_refused_and_an_invalid_config_is_not_stepped_around() {
        let f = Fake::new(2);
        let jump = CacheConfig { epoch: u64::MAX, ..proposed(4096) };
        assert!(matches!(f.propose(1, &jump).await.unwrap(), SetOutcome::Stale(c) if c.epoch == 1));
        // A target the lagging server refuses: an error, not a loop.
        f.cfgs.lock().unwrap()[0] = Some(CacheConfig { epoch: 5, block_size: 3000, ..proposed(4096) });
        let r = repair(&f).await.unwrap();
        assert_eq!(r.lagging.len(), 1);
        assert!(r.lagging[0].1.contains("refused epoch 2"), "{:?}", r.lagging);
        assert_eq!(f.epochs()[1], Some(1));
    }
}
