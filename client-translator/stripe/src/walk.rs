//! The heal walk: a whole tree made to agree with server 0.
//!
//! A lookup repairs the one name it meets ([`crate::heal`]); what a
//! follower holds that server 0 lacks is never looked up by users (listings
//! come from server 0), and a directory move a follower missed needs both
//! its old and its new place met. The walk lists every directory on every
//! server and looks up the union of the names, so both halves are met in
//! one pass. It runs in the gateway when root sets the virtual xattr
//! [`HEAL_XATTR`] on a directory of the mount (`setfattr -n
//! trusted.imca.heal -v 1 MOUNT`): the kernel lets only CAP_SYS_ADMIN set a
//! `trusted.*` xattr, and the walk only makes followers agree with server 0.
//!
//! Passes repeat while the previous one repaired something (a file left
//! because its id lived only under a stale name is linked in one pass and
//! its stale name removed in the next), or after waiting out the names left
//! as possible creates under way (`heal::maybe_in_flight`), at most
//! [`MAX_PASSES`] times.

use crate::heal::{disagree, list, HealReport};
use crate::Stripe;
use std::collections::BTreeSet;
use xlator::*;

/// The virtual xattr whose setting starts a walk (never stored).
pub const HEAL_XATTR: &str = "trusted.imca.heal";
/// Upper bound of passes of one walk.
pub const MAX_PASSES: usize = 4;

impl Stripe {
    /// Walk `top` until the servers agree (or [`MAX_PASSES`]); the report
    /// counts every pass, with `left` from the last one.
    pub async fn heal_tree(&self, top: &Loc) -> HealReport {
        let mut total = HealReport::default();
        for pass in 1..=MAX_PASSES {
            let r = self.heal_pass(top).await;
            tracing::info!(pass, checked = r.checked, repaired = r.repaired, left = r.left, path = %top.path, "stripe heal: pass done");
            total.checked += r.checked;
            total.repaired += r.repaired;
            total.left = r.left;
            total.young = r.young;
            if r.repaired == 0 && r.young == 0 || pass == MAX_PASSES {
                break;
            }
            if r.repaired == 0 {
                // Only names that may be creates under way are left: once
                // they are older than that allows, they are strays.
                tracing::info!(young = r.young, "stripe heal: waiting for new follower-only names to settle");
                tokio::time::sleep(self.heal_grace).await;
            }
        }
        total
    }

    async fn heal_pass(&self, top: &Loc) -> HealReport {
        let mut report = HealReport::default();
        let mut todo = vec![top.clone()];
        while let Some(dir) = todo.pop() {
            let names = match self.union_names(&dir).await {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(path = %dir.path, ?e, "stripe heal: cannot list a directory; its tree is not checked");
                    report.left += 1;
                    continue;
                }
            };
            for name in names {
                report.checked += 1;
                let all = self.on_all(|s| s.lookup(&dir, &name)).await;
                let mut ours = all.first().cloned().unwrap_or(Err(FsError::EIO));
                if disagree(&all) {
                    let h = self.heal_name(&dir, &name, &all[1..]).await;
                    report.add(h);
                    if h.repaired > 0 {
                        ours = self.first().lookup(&dir, &name).await;
                    }
                }
                if let Ok(a) = ours {
                    if a.kind == FileKind::Dir {
                        todo.push(Loc { path: dir.child(&name).path, fid: Some(a.fid) });
                    }
                }
            }
        }
        report
    }

    /// The names any server lists in `dir`. A follower that lacks the
    /// directory itself was just given it by the lookup of its name.
    async fn union_names(&self, dir: &Loc) -> FsResult<BTreeSet<String>> {
        let mut names = BTreeSet::new();
        for (i, r) in self.on_all(|s| Box::pin(list(s, dir))).await.into_iter().enumerate() {
            match r {
                Ok(n) => names.extend(n),
                Err(FsError::ENOENT) if i > 0 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(names)
    }
}
