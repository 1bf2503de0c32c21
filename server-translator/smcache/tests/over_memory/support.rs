//! The stack under test: SMCache over a memory leaf, following a test
//! volume over an in-process bank.

use bytes::Bytes;
use smcache::{SmCache, SmOptions};
use std::sync::Arc;
use std::time::Duration;
use testkit::{CacheConfig, FenceRequests, Memory, TestBank, TestVolume, View};
use xlator::*;

pub struct Stack {
    pub bank: TestBank,
    pub volume: TestVolume,
    /// the disk, read and written behind SMCache's back when a test needs to
    pub leaf: Arc<Memory>,
    pub sm: Arc<InGraph<SmCache>>,
    /// the nodes SMCache asked to have fenced
    pub fences: Arc<FenceRequests>,
}

/// Options for tests: a deadline long enough for a loaded machine (a live
/// node always confirms well within it).
pub fn opts() -> SmOptions {
    SmOptions { threaded: false, deadline: Duration::from_secs(10), bank: testkit::bank_options(), ..Default::default() }
}

impl Stack {
    /// `nodes` live nodes, blocks of `block_size`.
    pub async fn start(nodes: usize, block_size: u32) -> Stack {
        let bank = TestBank::start(nodes).await;
        let config = bank.config(block_size);
        Stack::over(bank, config, opts())
    }

    pub fn over(bank: TestBank, config: CacheConfig, opts: SmOptions) -> Stack {
        Stack::over_with(bank, config, opts, |leaf| leaf)
    }

    /// With `wrap` around the leaf (a translator that delays or hooks calls).
    pub fn over_with(bank: TestBank, config: CacheConfig, opts: SmOptions, wrap: impl FnOnce(Next) -> Next) -> Stack {
        let volume = TestVolume::new(config);
        let leaf = testkit::memory();
        let fences = Arc::new(FenceRequests::default());
        let sm = Arc::new(SmCache::new(wrap(leaf.clone()), volume.server_rx(), fences.clone(), opts, &prometheus::Registry::new()));
        Stack { bank, volume, leaf, sm, fences }
    }

    /// The bank under the servers' current config.
    pub fn view(&self) -> View {
        self.bank.view(&self.volume.config())
    }

    /// An empty file at the root that SMCache did not make (as every file
    /// but one just made through it): its writes rewrite their blocks.
    pub async fn create(&self, name: &str) -> Loc {
        self.on_disk(name, &[]).await
    }

    /// A file made through SMCache at the root: new, so until its blocks
    /// are first stored its writes leave the bank alone (`fresh`).
    pub async fn make(&self, name: &str) -> Loc {
        let new = testkit::new_file(name);
        self.sm.create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap();
        testkit::at(name, new.fid)
    }

    /// A file with `data`, put on the disk behind SMCache's back (so the
    /// bank holds nothing of it).
    pub async fn on_disk(&self, name: &str, data: &[u8]) -> Loc {
        let new = testkit::new_file(name);
        let leaf: &dyn Translator = &*self.leaf;
        leaf.create(&Loc::root(), &new, libc::O_RDWR | libc::O_CREAT).await.unwrap();
        let loc = testkit::at(name, new.fid);
        leaf.write(&loc, 0, Bytes::copy_from_slice(data)).await.unwrap();
        loc
    }

    /// Bytes `[start, end)` of a file as the disk has them (short at EOF).
    pub async fn disk(&self, loc: &Loc, start: u64, end: u64) -> Bytes {
        let leaf: &dyn Translator = &*self.leaf;
        leaf.read(loc, start, (end - start) as u32).await.unwrap()
    }
}

pub fn fid(loc: &Loc) -> FileId {
    loc.fid.expect("a located file")
}

/// Distinct bytes, so a block from the wrong place never matches.
pub fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len).map(|i| ((i / 7) as u8).wrapping_add(seed).wrapping_mul(13)).collect()
}
