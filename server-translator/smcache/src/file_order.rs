//! Per-file serialisation: "disk read + populate" takes a file's lock
//! shared, "disk write + cache update" takes it exclusive. Striped (a fixed
//! table of locks indexed by a hash of the file id) so memory stays bounded;
//! two files sharing a stripe only wait for each other, never deadlock,
//! because nobody holds two stripes at once.

use std::sync::Arc;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use xlator::FileId;

const STRIPES: usize = 1024;

pub struct FileOrder {
    stripes: Vec<Arc<RwLock<()>>>,
}

impl Default for FileOrder {
    fn default() -> Self {
        FileOrder { stripes: (0..STRIPES).map(|_| Arc::new(RwLock::new(()))).collect() }
    }
}

impl FileOrder {
    fn stripe(&self, fid: FileId) -> Arc<RwLock<()>> {
        let h = (fid.0 as u64) ^ ((fid.0 >> 64) as u64);
        self.stripes[(h.wrapping_mul(0x9E3779B97F4A7C15) >> 54) as usize % STRIPES].clone()
    }

    pub async fn shared(&self, fid: FileId) -> OwnedRwLockReadGuard<()> {
        self.stripe(fid).read_owned().await
    }

    pub async fn exclusive(&self, fid: FileId) -> OwnedRwLockWriteGuard<()> {
        self.stripe(fid).write_owned().await
    }
}
