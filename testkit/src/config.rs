//! The volume config as the translators receive it: storage servers
//! (SMCache) follow a `watch::Receiver<CacheConfig>`, gateways (CMCache) a
//! `watch::Receiver<HeldConfig>` (`None` = no cache under the lease). In a
//! real volume the two are fed by `volume` and `admin::lease`; here the
//! test decides, and can move servers and gateways at different times.

use std::sync::Arc;
use tokio::sync::watch;
use volume::CacheConfig;

pub struct TestVolume {
    server: watch::Sender<CacheConfig>,
    gateway: watch::Sender<Option<Arc<CacheConfig>>>,
}

impl TestVolume {
    /// Servers and gateways both start on `config`.
    pub fn new(config: CacheConfig) -> TestVolume {
        let (server, _) = watch::channel(config.clone());
        let (gateway, _) = watch::channel(Some(Arc::new(config)));
        TestVolume { server, gateway }
    }

    /// For `SmCache::new`.
    pub fn server_rx(&self) -> watch::Receiver<CacheConfig> {
        self.server.subscribe()
    }

    /// For `CmCache::new` (a `cmcache::HeldConfig` receiver).
    pub fn gateway_rx(&self) -> watch::Receiver<Option<Arc<CacheConfig>>> {
        self.gateway.subscribe()
    }

    /// The servers' config.
    pub fn config(&self) -> CacheConfig {
        self.server.borrow().clone()
    }

    /// Both sides switch to `c` (a finished rollout).
    pub fn set(&self, c: CacheConfig) {
        self.server.send_replace(c.clone());
        self.gateway.send_replace(Some(Arc::new(c)));
    }

    pub fn set_server(&self, c: CacheConfig) {
        self.server.send_replace(c);
    }

    /// `None`: gateways hold no config (they bypass the bank).
    pub fn set_gateway(&self, c: Option<CacheConfig>) {
        self.gateway.send_replace(c.map(Arc::new));
    }

    /// The servers' config under the next epoch, changed by `f` (not yet sent).
    pub fn next(&self, f: impl FnOnce(&mut CacheConfig)) -> CacheConfig {
        let mut c = self.config();
        c.epoch += 1;
        f(&mut c);
        c
    }
}
