//! Cache nodes in this process, and a view of what they hold.
//!
//! Each live node is a real `imca cache-node` (`cache_node::start` on
//! 127.0.0.1:0: its own worker thread, the real protocol over real TCP), so
//! the translators under test use the real `cache_bank` client. Besides
//! live nodes a bank can have *dead* addresses (connections refused: a node
//! that died, whose old values are gone with it) and *silent* ones (a
//! listener that accepts and never answers: a frozen node).
//!
//! Values are MAC-framed under [`value_key`], as the daemons' are under the
//! volume's key: translators under test get [`bank_options`], and a
//! [`View`] reads and plants values with the same key.

use bytes::Bytes;
use cache_bank::value::{self, Kind};
use cache_bank::{Bank, BankOptions, CacheKey, Codec, Keys, Update};
use cache_node::stats::Counters;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use volume::{CacheConfig, Placement};
use xlator::*;

/// The bank value key of every test volume (a daemon derives its own from
/// the volume secret the same way).
pub fn value_key() -> secret::Key {
    secret::Secret::from_bytes(&[0x42; 32]).expect("32 bytes").key(secret::Purpose::BankValues)
}

/// Bank options for translators under test: values keyed with [`value_key`].
pub fn bank_options() -> BankOptions {
    BankOptions { value_key: Some(value_key()), ..Default::default() }
}

/// What stands behind one address of the bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Live,
    /// connections refused
    Dead,
    /// connections accepted, never answered
    Silent,
}

struct Slot {
    addr: String,
    node: Option<Arc<cache_node::Node>>,
    handle: Option<cache_node::Handle>,
    /// a silent node's listener, kept open
    _silent: Option<TcpListener>,
}

type Slots = Arc<Mutex<Vec<Slot>>>;

pub struct TestBank {
    slots: Slots,
}

/// A small node: one worker thread, 16 MiB.
fn node_config() -> cache_node::Config {
    cache_node::Config { threads: 1, memory_bytes: 16 << 20, ..cache_node::Config::local() }
}

impl TestBank {
    /// `n` live nodes, listening when this returns.
    pub async fn start(n: usize) -> TestBank {
        TestBank::with(&vec![NodeState::Live; n]).await
    }

    pub async fn with(states: &[NodeState]) -> TestBank {
        let mut slots = Vec::new();
        for s in states {
            slots.push(match s {
                NodeState::Live => {
                    let h = cache_node::start(node_config()).await.expect("start a cache node");
                    Slot { addr: h.addr.to_string(), node: Some(h.node.clone()), handle: Some(h), _silent: None }
                }
                NodeState::Dead => {
                    // bound and closed again: nothing listens there now
                    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
                    Slot { addr: l.local_addr().unwrap().to_string(), node: None, handle: None, _silent: None }
                }
                NodeState::Silent => {
                    // the kernel completes connections into the backlog; nobody reads them
                    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
                    Slot { addr: l.local_addr().unwrap().to_string(), node: None, handle: None, _silent: Some(l) }
                }
            });
        }
        TestBank { slots: Arc::new(Mutex::new(slots)) }
    }

    pub fn addrs(&self) -> Vec<String> {
        self.slots.lock().unwrap().iter().map(|s| s.addr.clone()).collect()
    }

    pub fn addr(&self, i: usize) -> String {
        self.slots.lock().unwrap()[i].addr.clone()
    }

    /// A volume config over every address of this bank, with blocks of
    /// `block_size` and a generous read timeout (a slow answer is a miss,
    /// and tests that count hits must not see a busy machine as misses).
    pub fn config(&self, block_size: u32) -> CacheConfig {
        CacheConfig {
            epoch: 1,
            volume: "test".into(),
            nodes: self.addrs(),
            fenced: Vec::new(),
            block_size,
            placement: Placement::Consistent,
            timeout_ms: 2000,
            lease_ms: 1000,
        }
    }

    /// Stop live node `i`: its address refuses connections from now on,
    /// and what it held is gone (as when a node's process dies).
    pub async fn kill(&self, i: usize) {
        let h = {
            let mut slots = self.slots.lock().unwrap();
            slots[i].node = None;
            slots[i].handle.take()
        };
        if let Some(h) = h {
            h.shutdown().await;
        }
    }

    /// Items held by all live nodes together.
    pub fn items(&self) -> usize {
        self.slots.lock().unwrap().iter().filter_map(|s| s.node.as_ref()).map(|n| n.store.items()).sum()
    }

    /// The bank as `config` lays it out.
    pub fn view(&self, config: &CacheConfig) -> View {
        let opts = BankOptions { timeout: Duration::from_secs(5), connect_timeout: Duration::from_secs(1), ..bank_options() };
        View {
            slots: self.slots.clone(),
            keys: Keys::from_config(config),
            client: Bank::new(&config.nodes, config.placement, opts),
        }
    }
}

/// The bank under one volume config: read keys straight from the nodes'
/// stores (no network, no counters touched), plant values through a bank
/// client (so they land where the translators will look).
pub struct View {
    slots: Slots,
    pub keys: Keys,
    client: Bank,
}

impl View {
    /// The value under `key` on whichever live node holds it.
    pub fn raw(&self, key: &CacheKey) -> Option<Bytes> {
        let slots = self.slots.lock().unwrap();
        slots
            .iter()
            .filter_map(|s| s.node.as_ref())
            .find_map(|n| n.get(&mut Counters::default(), key.key.as_bytes(), None).map(|(v, _, _)| Bytes::copy_from_slice(&v)))
    }

    /// How values are framed and checked here (the translators' codec).
    pub fn codec(&self) -> &Codec {
        self.client.codec()
    }

    /// A file's cached stat, if an intact one is there.
    pub fn stat(&self, fid: FileId) -> Option<Attr> {
        let k = self.keys.stat(fid);
        self.codec().decode(Kind::Stat, &k.key, &self.raw(&k)?).and_then(|p| value::parse_attr(&p))
    }

    /// Whether anything (a value, a claim's placeholder) is under a stat key.
    pub fn has_stat_key(&self, fid: FileId) -> bool {
        self.raw(&self.keys.stat(fid)).is_some()
    }

    /// The cached entry `name` in `parent`: the child's id.
    pub fn dentry(&self, parent: FileId, name: &str) -> Option<FileId> {
        let k = self.keys.dentry(parent, name);
        self.codec().decode(Kind::Dentry, &k.key, &self.raw(&k)?).and_then(|p| value::parse_dentry(&p, name)).map(|(f, _)| f)
    }

    /// Block `n` of a file, if an intact one is there.
    pub fn block(&self, fid: FileId, n: u64) -> Option<Bytes> {
        let k = self.keys.block(fid, n);
        self.codec().decode(Kind::Block, &k.key, &self.raw(&k)?)
    }

    /// Store `v` under `key`, confirmed by its node.
    pub async fn put(&self, key: CacheKey, v: Bytes) {
        self.client.update(&[Update::Set(key, v)], Some(Duration::from_secs(5))).await.expect("plant a value");
    }

    pub async fn put_stat(&self, a: &Attr) {
        let k = self.keys.stat(a.fid);
        let v = self.codec().encode(Kind::Stat, &k.key, &value::attr_payload(a));
        self.put(k, v).await
    }

    pub async fn put_dentry(&self, parent: FileId, name: &str, child: FileId, kind: FileKind) {
        let k = self.keys.dentry(parent, name);
        let v = self.codec().encode(Kind::Dentry, &k.key, &value::dentry_payload(child, kind, name));
        self.put(k, v).await
    }

    pub async fn put_block(&self, fid: FileId, n: u64, payload: &[u8]) {
        let k = self.keys.block(fid, n);
        let v = self.codec().encode(Kind::Block, &k.key, payload);
        self.put(k, v).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    #[tokio::test]
    async fn nodes_live_die_and_stay_silent_as_asked() {
        let bank = TestBank::with(&[NodeState::Live, NodeState::Live, NodeState::Dead, NodeState::Silent]).await;
        let mut config = bank.config(4096);
        config.nodes.truncate(2);
        let v = bank.view(&config);
        let fid = FileId(0x5eed);
        v.put_block(fid, 0, b"block").await;
        assert_eq!(&v.block(fid, 0).unwrap()[..], b"block");
        assert_eq!(v.stat(fid), None);
        assert_eq!(bank.items(), 1);

        let holder = (0..2).find(|&i| bank.slots.lock().unwrap()[i].node.as_ref().unwrap().store.items() == 1).unwrap();
        bank.kill(holder).await;
        assert_eq!(v.block(fid, 0), None, "a dead node's items are gone");
        let refused = |i: usize| TcpStream::connect(bank.addr(i)).is_err();
        assert!(refused(holder) && refused(2), "dead addresses refuse connections");
        assert!(!refused(1 - holder) && !refused(3), "live and silent ones accept");
    }
}
