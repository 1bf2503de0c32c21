//! Repair of a follower whose copy of an object missed a chmod or chown.
//!
//! ```text
//!  lookup / walk ──> same id and kind everywhere, but a follower's mode,
//!                    uid or gid is not server 0's ──> setattr on that follower
//! ```
//!
//! A setattr goes to every server at once; a follower that crashed or was
//! cut off in between keeps the old mode or owner while the caller was
//! told the change failed. Users do not see it (a file's permissions and
//! owner come from server 0's copy, a directory's or symlink's from server
//! 0 alone, and the servers check no permissions: the gateway's kernel does,
//! on those), but the exports then disagree, and a server's disk quota
//! counts the copy's blocks to the wrong owner. Server 0's values win, as
//! for names (`heal`).
//!
//! Times are not repaired. A file's times are the latest of its copies'
//! (`merge`): a write touches only the copies it reaches, so a follower
//! whose mtime is newer than server 0's is the normal case, and a `touch
//! -d` to an older date that a follower missed looks exactly like that.
//! Telling them apart needs a record per copy of the last time set.
//!
//! A heal racing a setattr can revert it on a follower for a moment: the
//! setattr reaches the follower, the heal's second look at server 0 still
//! sees the old value and writes it back, then the setattr reaches server
//! 0. Nobody sees the follower's value (above); the next lookup or walk
//! that meets the name repairs it.

use crate::Stripe;
use xlator::*;

/// Does follower copy `a` differ from server 0's `f` in mode or owner?
/// (A symlink's mode cannot be changed, so it is not compared.)
pub(crate) fn differs(f: &Attr, a: &Attr) -> bool {
    (f.kind != FileKind::Symlink && f.perm != a.perm) || f.uid != a.uid || f.gid != a.gid
}

impl Stripe {
    /// Give follower `i`'s copy `a` of `parent/name` server 0's mode and
    /// owner (`f`). False: the follower answered with values that still
    /// differ (an export policy that keeps other bits, say); left, logged
    /// by the caller.
    pub(crate) async fn copy_mode_owner(&self, i: usize, parent: &Loc, name: &str, f: &Attr, a: &Attr) -> FsResult<bool> {
        let at = Loc { path: parent.child(name).path, fid: Some(f.fid) };
        let owner_differs = f.uid != a.uid || f.gid != a.gid;
        let set = SetAttr {
            uid: (f.uid != a.uid).then_some(f.uid),
            gid: (f.gid != a.gid).then_some(f.gid),
            // A chown may drop set-id bits, so the mode goes with it. Only
            // what differs is set: a chown to root that root squash refuses
            // must not stop a chmod.
            perm: (f.kind != FileKind::Symlink && (f.perm != a.perm || owner_differs)).then_some(f.perm),
            ..SetAttr::default()
        };
        let now = self.subvols[i].setattr(&at, &set).await?;
        Ok(!differs(f, &now))
    }
}
