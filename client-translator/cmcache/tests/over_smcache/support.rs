//! The stack under test: CMCache gateways over SMCache over a memory leaf,
//! all following one test volume over an in-process bank.

use bytes::Bytes;
use cmcache::CmCache;
use smcache::{SmCache, SmOptions};
use std::sync::Arc;
use std::time::Duration;
use testkit::{CacheConfig, Memory, TestBank, TestVolume, View};
use xlator::*;

pub struct Spec {
    pub nodes: usize,
    pub block_size: u32,
    pub gateways: usize,
    /// the stripe unit CMCache is told about (None: not told)
    pub stripe_unit: Option<u64>,
}

impl Default for Spec {
    fn default() -> Self {
        Spec { nodes: 2, block_size: 4096, gateways: 1, stripe_unit: None }
    }
}

pub struct Stack {
    pub bank: TestBank,
    pub volume: TestVolume,
    /// the disk: its answers are the truth, its call counts show what the bank spared it
    pub leaf: Arc<Memory>,
    pub gateways: Vec<Next>,
    /// each gateway's metrics
    pub registries: Vec<prometheus::Registry>,
}

impl Stack {
    pub async fn start(spec: Spec) -> Stack {
        let bank = TestBank::start(spec.nodes).await;
        let config = bank.config(spec.block_size);
        Stack::over(bank, config, spec, |sm| sm)
    }

    /// Over `bank` under `config`, with `between` wrapped around SMCache
    /// (what the gateways see as the storage server).
    pub fn over(bank: TestBank, config: CacheConfig, spec: Spec, between: impl FnOnce(Next) -> Next) -> Stack {
        let volume = TestVolume::new(config);
        let leaf = testkit::memory();
        let opts =
            SmOptions { threaded: false, deadline: Duration::from_secs(10), bank: testkit::bank_options(), ..Default::default() };
        let registry = prometheus::Registry::new();
        let sm: Next = Arc::new(SmCache::new(leaf.clone(), volume.server_rx(), Arc::default(), opts, &registry));
        let server = between(sm);
        // each gateway its own registry, as each gateway daemon has
        let registries: Vec<_> = (0..spec.gateways).map(|_| prometheus::Registry::new()).collect();
        let gateways = registries
            .iter()
            .map(|r| {
                let cm = CmCache::new(server.clone(), volume.gateway_rx(), testkit::bank_options(), r);
                let cm = match spec.stripe_unit {
                    Some(u) => cm.with_stripe_unit(u),
                    None => cm,
                };
                InGraph::node(cm)
            })
            .collect();
        Stack { bank, volume, leaf, gateways, registries }
    }

    /// Wait until gateway `g` has sent `n` create populates to the bank
    /// (they go out after the create is answered).
    pub async fn populated(&self, g: usize, n: u64) {
        let sent = || {
            self.registries[g]
                .gather()
                .iter()
                .filter(|f| f.name() == "imca_gateway_cache_total")
                .flat_map(|f| f.get_metric().iter())
                .filter(|m| {
                    let l = m.get_label();
                    l.iter().any(|p| p.value() == "create") && l.iter().any(|p| p.value() == "populate")
                })
                .map(|m| m.get_counter().get_value() as u64)
                .sum::<u64>()
        };
        let t0 = std::time::Instant::now();
        while sent() < n {
            assert!(t0.elapsed() < Duration::from_secs(10), "gateway {g}: {} of {n} create populates sent", sent());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The first gateway.
    pub fn gw(&self) -> &dyn Translator {
        &*self.gateways[0]
    }

    /// The disk, asked directly.
    pub fn disk(&self) -> &dyn Translator {
        &*self.leaf
    }

    pub fn view(&self) -> View {
        self.bank.view(&self.volume.config())
    }

    pub fn calls(&self, op: Fop) -> u64 {
        self.leaf.calls(op)
    }

    /// A file with `data`, created and written through the first gateway.
    pub async fn file(&self, name: &str, data: &[u8]) -> Loc {
        let new = testkit::new_file(name);
        self.gw().create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap();
        let loc = testkit::at(name, new.fid);
        if !data.is_empty() {
            // Read once first: a file just made has no block in the bank,
            // and its writes store none until a read stored one (smcache's
            // `fresh`); these tests want what is written stored.
            self.gw().read(&loc, 0, 1).await.unwrap();
            self.gw().write(&loc, 0, Bytes::copy_from_slice(data)).await.unwrap();
        }
        loc
    }

    /// A file with `data` put on the disk behind every cache's back.
    pub async fn on_disk(&self, name: &str, data: &[u8]) -> Loc {
        let new = testkit::new_file(name);
        self.disk().create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap();
        let loc = testkit::at(name, new.fid);
        self.disk().write(&loc, 0, Bytes::copy_from_slice(data)).await.unwrap();
        loc
    }
}

/// Distinct bytes, so a block from the wrong place never matches.
pub fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len).map(|i| ((i / 7) as u8).wrapping_add(seed).wrapping_mul(13)).collect()
}

/// `(reads, getattrs, lookups)` that reached the leaf since `before`.
pub fn reached(s: &Stack, before: (u64, u64, u64)) -> (u64, u64, u64) {
    let now = counts(s);
    (now.0 - before.0, now.1 - before.1, now.2 - before.2)
}

pub fn counts(s: &Stack) -> (u64, u64, u64) {
    (s.calls(Fop::Read), s.calls(Fop::Getattr), s.calls(Fop::Lookup))
}
