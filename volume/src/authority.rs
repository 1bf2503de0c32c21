//! The volume's cache configuration as this storage server keeps it:
//! persisted in `EXPORT/.imca/volume.json`, published through a
//! `tokio::sync::watch` channel (SMCache and the protocol-server subscribe),
//! and changed only by compare-and-set on the epoch.
//!
//! Every config it holds passed [`validate`] with [`Limits::UNKNOWN`]: the
//! file at load (a file the rules refuse stops the server with the reason,
//! never a silent fix), local changes (`imca storage` flags) and
//! SetVolumeConfig proposals alike; a proposal must also carry exactly the
//! next epoch ([`acceptable`]), and a refused one is logged (warnings at a
//! bounded rate: anyone reaching the port could repeat them).

use crate::ratelog::RateLimited;
use crate::{validate, CacheConfig, FenceRequests, Invalid, Limits};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

    /// Accept `new` only if its epoch is exactly the current one + 1 and it
    /// is valid; answer (accepted, the config kept now). Changes are always
    /// proposed as (epoch read from server 0) + 1, so two changes based on
    /// the same epoch cannot both win (the loser learns the winner from the
    /// answer). "Exactly + 1", the admin API's rule too, rather than "any
    /// newer": a proposal of epoch 2^64-1 would otherwise be accepted and
    /// leave no epoch for any later change. A server that missed several
    /// changes is stepped forward one epoch at a time ([`crate::rollout`]).
    pub fn compare_and_set(&self, new: CacheConfig) -> io::Result<(bool, CacheConfig)> {
        let _g = self.write.lock().unwrap();
        let cur = self.current();
        if let Err(why) = acceptable(&cur, &new) {
            why.log(&cur, &new);
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
        new.epoch = cur.epoch.checked_add(1).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{}: epoch is at its largest value", self.path.display()))
        })?;
        persist(&self.path, &new)?;
        self.tx.send_replace(new.clone());
        Ok(new)
    }
}

/// Why a SetVolumeConfig proposal was refused.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// not newer than the current epoch: another change was installed first
    /// (the loser of a race, or a repair that another gateway did already)
    Stale,
    /// newer than current + 1: it would skip epochs
    Skips,
    Invalid(Invalid),
}

/// The rule every proposal is held to: epoch exactly `current.epoch + 1`
/// (also with the current epoch at `u64::MAX`, which no accepted proposal can
/// reach, but an old file might hold), and a config the options table accepts.
pub fn acceptable(current: &CacheConfig, new: &CacheConfig) -> Result<(), Refusal> {
    if new.epoch <= current.epoch {
        return Err(Refusal::Stale);
    }
    if Some(new.epoch) != current.epoch.checked_add(1) {
        return Err(Refusal::Skips);
    }
    validate(new, &Limits::UNKNOWN).map_err(Refusal::Invalid)
}

/// One warning line per this period for refusals of proposals that no
/// daemon of the volume sends (they skip epochs or break a rule): whoever
/// sends them can send them as fast as the wire allows.
const REFUSAL_LOG_PERIOD: Duration = Duration::from_secs(10);
static REFUSALS: RateLimited = RateLimited::new(REFUSAL_LOG_PERIOD);

impl Refusal {
    fn log(&self, cur: &CacheConfig, new: &CacheConfig) {
        let (current, proposed) = (cur.epoch, new.epoch);
        let e = match self {
            // The protocol working as designed (two changes from one epoch,
            // gateways repairing the same server at once): not a warning.
            Refusal::Stale => {
                tracing::debug!(current, proposed, "volume config proposal not newer than the current epoch: kept the current one");
                return;
            }
            Refusal::Skips => None,
            Refusal::Invalid(e) => Some(e),
        };
        let Some(held_back) = REFUSALS.allow() else { return };
        match e {
            None => tracing::warn!(
                current,
                proposed,
                held_back,
                "refused a volume config proposal: its epoch must be exactly the current one + 1"
            ),
            Some(e) => tracing::warn!(
                current,
                proposed,
                held_back,
                field = e.field,
                error = %e,
                "refused a volume config proposal: invalid"
            ),
        }
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
    fn only_exactly_the_next_epoch_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        let v = Volume::open(d.path()).unwrap();
        let at = |epoch| CacheConfig { epoch, block_size: 4096, ..Default::default() };
        for (epoch, why) in [(u64::MAX, Refusal::Skips), (3, Refusal::Skips), (1, Refusal::Stale), (0, Refusal::Stale)] {
            assert_eq!(acceptable(&v.current(), &at(epoch)), Err(why));
            assert_eq!(v.compare_and_set(at(epoch)).unwrap(), (false, CacheConfig::default()), "epoch {epoch}");
        }
        assert!(v.compare_and_set(at(2)).unwrap().0);
        // A file holding the largest epoch (left by an older server that took
        // any newer epoch) takes no proposal, and no local change either.
        let top = CacheConfig { epoch: u64::MAX, ..Default::default() };
        assert_eq!(acceptable(&top, &at(0)), Err(Refusal::Stale));
        std::fs::write(d.path().join(VOLUME_FILE), serde_json::to_vec(&top).unwrap()).unwrap();
        let v = Volume::open(d.path()).unwrap();
        assert_eq!(v.update(|c| c.block_size = 8192).unwrap_err().kind(), io::ErrorKind::InvalidData);
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
