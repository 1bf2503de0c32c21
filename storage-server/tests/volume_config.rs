//! SetVolumeConfig over the real wire is held to the admin API's rule: the
//! epoch must be exactly the server's + 1 (a proposal of 2^64-1 once left no
//! epoch for any later change). A server that missed several changes is
//! still brought to the authority's config, one epoch at a time.

mod common;
use async_trait::async_trait;
use common::*;
use protocol_client::ProtocolClient;
use volume::rollout::{self, SetOutcome, VolumeServers};
use volume::CacheConfig;

#[tokio::test]
async fn a_proposal_must_carry_exactly_the_next_epoch() {
    let e = env().await;
    let cur = e.c.fetch_volume_config().await.unwrap();
    let at = |epoch| CacheConfig { epoch, block_size: 64 * 1024, ..cur.clone() };
    for epoch in [u64::MAX, cur.epoch + 2, cur.epoch] {
        let (ok, kept) = e.c.set_volume_config(at(epoch)).await.unwrap();
        assert!(!ok, "epoch {epoch} accepted");
        assert_eq!(kept, cur, "the server keeps its config and says so");
    }
    assert_eq!(e.server.volume.current(), cur);
    let (ok, kept) = e.c.set_volume_config(at(cur.epoch + 1)).await.unwrap();
    assert!(ok);
    assert_eq!((kept.epoch, kept.block_size), (cur.epoch + 1, 64 * 1024));
    // ...and the next change after it works too (nothing was used up).
    assert!(e.c.set_volume_config(at(cur.epoch + 2)).await.unwrap().0);
    assert_eq!(e.c.epoch(), cur.epoch + 2, "replies carry the new epoch");
}

/// The storage servers as a gateway sees them, over protocol clients.
struct Servers(Vec<(String, ProtocolClient)>);

#[async_trait]
impl VolumeServers for Servers {
    fn addrs(&self) -> Vec<String> {
        self.0.iter().map(|(a, _)| a.clone()).collect()
    }
    async fn get(&self, i: usize) -> Result<CacheConfig, String> {
        self.0[i].1.fetch_volume_config().await.map_err(|e| e.to_string())
    }
    async fn propose(&self, i: usize, new: &CacheConfig) -> Result<SetOutcome, String> {
        let (ok, kept) = self.0[i].1.set_volume_config(new.clone()).await.map_err(|e| e.to_string())?;
        Ok(if ok { SetOutcome::Installed } else { SetOutcome::Stale(kept) })
    }
}

#[tokio::test]
async fn a_server_three_changes_behind_is_stepped_up_to_the_authority() {
    let (a, b) = (env().await, env().await);
    let mut servers = Vec::new();
    for s in [&a.server, &b.server] {
        let addr = s.addr.to_string();
        servers.push((addr.clone(), protocol_client::connect(&addr, opts()).await.unwrap()));
    }
    let servers = Servers(servers);
    // Three changes reach the authority only (server 1 was away).
    for (i, block) in [4096u32, 8192, 16384].into_iter().enumerate() {
        let next = CacheConfig { epoch: 2 + i as u64, block_size: block, ..a.server.volume.current() };
        assert_eq!(servers.propose(0, &next).await.unwrap(), SetOutcome::Installed);
    }
    assert_eq!(b.server.volume.epoch(), 1);
    let r = rollout::repair(&servers).await.unwrap();
    assert!(r.lagging.is_empty(), "{:?}", r.lagging);
    assert_eq!(b.server.volume.current(), a.server.volume.current());
    assert_eq!(b.server.volume.epoch(), 4);
    // A new change now reaches both in one step each.
    let next = CacheConfig { block_size: 32768, ..a.server.volume.current() };
    let done = rollout::rollout(&servers, next).await.unwrap();
    assert!(done.lagging.is_empty());
    assert_eq!(b.server.volume.current(), done.installed);
}
