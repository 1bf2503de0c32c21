//! The volume's cache configuration as this storage server keeps it:
//! persisted in `EXPORT/.imca/volume.json`, published through a
//! `tokio::sync::watch` channel (SMCache and the protocol-server subscribe),
//! and changed only by compare-and-set on the epoch.
//!
//! Every config it holds passed [`validate`] with [`Limits::UNKNOWN`]: the
//! file at load (a file the rules refuse stops the server with the reason,
//! never a silent fix), local changes (`imca storage` flags) and
//! SetVolumeConfig proposals alike.

use crate::{validate, CacheConfig, FenceRequests, Limits};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

pub const VOLUME_FILE: &str = "volume.json";

pub struct Volume {
    path: PathBuf,
    tx: Arc<watch::Sender<CacheConfig>>,
    /// serialises persist + publish, so the file and the channel agree
    write: Mutex<()>,
    /// cache nodes SMCache wants fenced; answered with every GetVolumeConfig
    pub fences: Arc<FenceRequests>,
}

impl Volume {
    /// Load `meta_dir/volume.json`, or create it with the defaults. A file
    /// the rules refuse is an error naming the file and the problem.
    pub fn open(meta_dir: &Path) -> io::Result<Volume> {
        let path = meta_dir.join(VOLUME_FILE);
        let config = match std::fs::read(&path) {
            Ok(b) => {
                let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
                let c: CacheConfig = serde_json::from_slice(&b).map_err(|e| bad(e.to_string()))?;
                validate(&c, &Limits::UNKNOWN)
                    .map_err(|e| bad(format!("{e}; correct `{}` in this file (nothing was changed)", e.field)))?;
                c
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let c = CacheConfig::default();
                persist(&path, &c)?;
                c
            }
            Err(e) => return Err(e),
        };
        Ok(Volume {
            path,
            tx: Arc::new(watch::Sender::new(config)),
            write: Mutex::new(()),
            fences: Arc::default(),
        })
    }

    pub fn current(&self) -> CacheConfig {
        self.tx.borrow().clone()
    }

    pub fn epoch(&self) -> u64 {
        self.tx.borrow().epoch
    }

    /// The sender side, for translators that need to publish or hold it.
    pub fn sender(&self) -> Arc<watch::Sender<CacheConfig>> {
        self.tx.clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<CacheConfig> {
        self.tx.subscribe()
    }

    /// Accept `new` only if its epoch is newer than the current one and it
    /// is valid; answer (accepted, the config kept now). Changes are always
    /// proposed as (epoch read from server 0) + 1, so two changes based on
    /// the same epoch cannot both win; "newer" rather than "exactly + 1" lets
    /// a server that missed several changes (down meanwhile) be brought
    /// straight to the authority's config ([`crate::rollout::repair`]).
    pub fn compare_and_set(&self, new: CacheConfig) -> io::Result<(bool, CacheConfig)> {
        let _g = self.write.lock().unwrap();
        let cur = self.current();
        if new.epoch <= cur.epoch {
            return Ok((false, cur));
        }
        if let Err(e) = validate(&new, &Limits::UNKNOWN) {
            tracing::warn!(epoch = new.epoch, field = e.field, error = %e, "refused an invalid volume config");
            return Ok((false, cur));
        }
        persist(&self.path, &new)?;
        self.tx.send_replace(new.clone());
        Ok((true, new))
    }

    /// Apply a local change (e.g. `--cache-nodes`); bumps the epoch if the
    /// config actually changed.
    pub fn update(&self, f: impl FnOnce(&mut CacheConfig)) -> io::Result<CacheConfig> {
        let _g = self.write.lock().unwrap();
        let cur = self.current();
        let mut new = cur.clone();
        f(&mut new);
        new.epoch = cur.epoch;
        if new == cur {
            return Ok(cur);
        }
        validate(&new, &Limits::UNKNOWN).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        new.epoch = cur.epoch + 1;
        persist(&self.path, &new)?;
        self.tx.send_replace(new.clone());
        Ok(new)
    }
}

/// Write-then-rename, so a crash leaves the old or the new file, never half.
fn persist(path: &Path, c: &CacheConfig) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec_pretty(c).map_err(io::Error::other)?;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_and_set_and_persist() {
        let d = tempfile::tempdir().unwrap();
        let v = Volume::open(d.path()).unwrap();
        assert_eq!(v.epoch(), 1);
        let mut rx = v.subscribe();
        let mut c = v.current();
        c.block_size = 4096;
        c.epoch = 1; // not newer than the current epoch
        let (ok, kept) = v.compare_and_set(c.clone()).unwrap();
        assert!(!ok);
        assert_eq!(kept.epoch, 1);
        c.epoch = 2;
        assert!(v.compare_and_set(c.clone()).unwrap().0);
        assert!(rx.has_changed().unwrap());
        assert_eq!(rx.borrow_and_update().block_size, 4096);
        // Invalid block size refused even with the right epoch.
        let mut bad = v.current();
        bad.epoch = 3;
        bad.block_size = 1000;
        assert!(!v.compare_and_set(bad).unwrap().0);
        // Survives a restart.
        drop(v);
        let v = Volume::open(d.path()).unwrap();
        assert_eq!(v.current(), c);
        // update bumps only on change
        let c2 = v.update(|c| c.nodes = vec!["a:1".into()]).unwrap();
        assert_eq!(c2.epoch, 3);
        assert_eq!(v.update(|c| c.nodes = vec!["a:1".into()]).unwrap().epoch, 3);
        // and follows the same rules (e.g. `imca storage --cache-nodes`)
        let e = v.update(|c| c.nodes = vec!["no-port".into()]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("no-port"), "{e}");
        assert_eq!(v.epoch(), 3);
    }

    #[test]
    fn a_raw_proposal_is_held_to_the_table() {
        let d = tempfile::tempdir().unwrap();
        let v = Volume::open(d.path()).unwrap();
        for bad in [
            CacheConfig { epoch: 2, lease_ms: 0, ..Default::default() },
            CacheConfig { epoch: 2, volume: "a b".into(), ..Default::default() },
            CacheConfig { epoch: 2, nodes: vec!["a:1".into(), "a:1".into()], ..Default::default() },
        ] {
            assert!(!v.compare_and_set(bad).unwrap().0);
        }
        // ...but not to limits only a gateway knows (its stripe unit, the nodes' -I).
        let big = CacheConfig { epoch: 2, block_size: 1 << 20, ..Default::default() };
        assert!(v.compare_and_set(big).unwrap().0);
    }

    #[test]
    fn a_file_with_a_refused_name_stops_the_server_with_the_reason() {
        let d = tempfile::tempdir().unwrap();
        let old = CacheConfig { volume: "my vol".into(), ..Default::default() };
        std::fs::write(d.path().join(VOLUME_FILE), serde_json::to_vec(&old).unwrap()).unwrap();
        let e = Volume::open(d.path()).err().expect("refused");
        let msg = e.to_string();
        assert!(msg.contains(VOLUME_FILE) && msg.contains("\"my vol\"") && msg.contains("`volume`"), "{msg}");
        // nothing was rewritten
        let kept: CacheConfig = serde_json::from_slice(&std::fs::read(d.path().join(VOLUME_FILE)).unwrap()).unwrap();
        assert_eq!(kept.volume, "my vol");
    }
}
