//! Creating operations (create, mkdir, mknod, symlink): server 0 decides,
//! the followers follow — and both are asked at once.
//!
//! ```text
//!  new name, id P (drawn by the gateway)
//!     ├── server 0: the operation as asked            ─┐ one round trip
//!     └── followers: the same, exclusive, with id P   ─┘
//!  server 0 made P ──> a follower that made P: done
//!                      a follower that found the name taken: the follower step (`follow`)
//!  server 0 opened an existing file E (a create without O_EXCL)
//!                  ──> every follower: the follower step with E (a P it made is a stray)
//!  server 0 failed ──> its error; what a follower made is left to the heal
//! ```
//!
//! Why: a create asked server 0 first and the followers after, two round
//! trips (and, with a bank, two rounds of bank deletes) where one does,
//! and an untar is mostly creates. The common case — a new name nobody
//! else is making — now costs one.
//!
//! What it costs in reasoning: a follower may hold a new name *before*
//! server 0 does, so "server 0 goes first" (which the heal relied on to
//! never remove what an operation is about to finish) no longer holds for
//! creates. Two rules restore it (docs/design.md, "Creates in one round
//! trip"):
//!
//! * server 0's answer to a speculative create is waited for at most
//!   [`IN_FLIGHT`]; later, the create fails (EIO), so a create is only
//!   ever acknowledged within that window of its followers' part (the open
//!   server 0 counts if it still makes the file is released when it
//!   answers: `decided_create`);
//! * the heal leaves a follower-only object that is *pristine* (its access
//!   and modification times are still its creation's: nothing read or
//!   wrote it, which a create acknowledged to anyone would allow) and
//!   younger than [`IN_FLIGHT`]: it may be such a create on its way to
//!   server 0 (`heal::maybe_in_flight`).
//!
//! A gateway whose create lost on server 0 (the name was taken, or server
//! 0 failed) does not remove what it made on the followers by name: by then
//! the winner may have replaced it there. Its strays are removed by whoever
//! next knows server 0's decision for the name (the winner's follower step,
//! a lookup's heal, the walk); until then no one sees them (lookups and
//! listings answer from server 0).

use crate::merge::{merge_attrs, pick_error};
use crate::{Fut, Stripe};
use futures::future::join_all;
use std::time::Duration;
use xlator::*;

/// How long a speculative create waits for server 0; also how young a
/// pristine follower-only object must be for the heal to leave it.
pub const IN_FLIGHT: Duration = Duration::from_secs(10);

impl Stripe {
    /// Server 0's step, bounded by [`IN_FLIGHT`] (see the module page).
    async fn decided(&self, step: Fut<'_, Made>) -> FsResult<Made> {
        match tokio::time::timeout(IN_FLIGHT, step).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!("stripe: server 0 did not answer a create in time; failing it");
                Err(FsError::EIO)
            }
        }
    }

    /// Server 0's step of a create, bounded like [`Stripe::decided`]. A
    /// create that server 0 carries out after the bound still counted an
    /// open there, and the caller, told EIO, sends no release: the release
    /// goes when server 0's answer comes. The file it made is left: our id
    /// on every server that has it, empty, a create whose answer was lost.
    async fn decided_create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let s0 = self.first().clone();
        let path = parent.child(&new.name).path;
        let mut step = {
            let (s0, parent, new) = (s0.clone(), parent.clone(), new.clone());
            Box::pin(async move { s0.create(&parent, &new, flags).await })
        };
        match tokio::time::timeout(IN_FLIGHT, &mut step).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!(%path, "stripe: server 0 did not answer a create in time; failing it");
                tokio::spawn(async move {
                    if let Ok(m) = step.await {
                        let _ = s0.release(&Loc { path, fid: Some(m.attr.fid) }).await;
                    }
                });
                Err(FsError::EIO)
            }
        }
    }

    /// A new directory, symlink or node named by `new` in `parent`:
    /// `step(server, new)` on every server at once.
    pub(crate) async fn make_everywhere<'a>(
        &'a self,
        parent: &'a Loc,
        new: &'a NewFile,
        dir: bool,
        step: impl Fn(&'a Next) -> Fut<'a, Made> + Sync,
    ) -> FsResult<Made> {
        let step = &step;
        let (first, spec) = futures::join!(self.decided(step(self.first())), join_all(self.rest().iter().map(step)));
        let first = match first {
            Ok(a) => a,
            Err(e) => {
                self.note_strays(parent, &new.name, &spec);
                return Err(e);
            }
        };
        // server 0 made it with our id (an existing name is EEXIST there)
        let made = first.attr.fid;
        let rest = join_all(self.rest().iter().enumerate().zip(spec).map(|((k, s), r)| async move {
            match r {
                Ok(m) if m.attr.fid == made => Ok(m),
                Ok(_) | Err(FsError::EEXIST) => {
                    self.follow(k + 1, parent, &new.name, made, || step(s), false).await
                }
                Err(e) => Err(e),
            }
        }))
        .await;
        self.finish_create(parent, &new.name, dir, first, rest).await
    }

    /// A regular file: server 0's create as asked, the followers'
    /// exclusively with the same id; a follower that found the name taken,
    /// or server 0 that opened another id, gets the follower step (a
    /// non-exclusive create with server 0's id, which opens it).
    pub(crate) async fn create_everywhere(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        let spec_new = NewFile { exclusive: true, ..new.clone() };
        let (first, spec) = futures::join!(
            self.decided_create(parent, new, flags),
            join_all(self.rest().iter().map(|s| s.create(parent, &spec_new, (flags | libc::O_EXCL) & !libc::O_TRUNC)))
        );
        let at = |fid| Loc { path: parent.child(&new.name).path, fid: Some(fid) };
        let first = match first {
            Ok(a) => a,
            Err(e) => {
                // (what the followers made stays for the heal; see the module page)
                self.note_strays(parent, &new.name, &spec);
                let made = self.rest().iter().zip(&spec).filter_map(|(s, r)| Some((s, r.as_ref().ok()?.attr.fid)));
                join_all(made.map(|(s, fid)| async move { s.release(&at(fid)).await })).await;
                return Err(e);
            }
        };
        let decided = first.attr.fid;
        let follow_new = NewFile { fid: decided, exclusive: false, ..new.clone() };
        let follow_flags = flags & !libc::O_EXCL;
        let rest = join_all(self.rest().iter().enumerate().zip(spec).map(|((k, s), r)| {
            let (follow_new, at) = (&follow_new, &at);
            async move {
                match r {
                    Ok(m) if m.attr.fid == decided => Ok(m),
                    Ok(stray) => {
                        // server 0 opened an existing file this follower lacked
                        let _ = s.release(&at(stray.attr.fid)).await;
                        self.follow(
                            k + 1,
                            parent,
                            &new.name,
                            decided,
                            || s.create(parent, follow_new, follow_flags),
                            true,
                        )
                        .await
                    }
                    Err(FsError::EEXIST) => {
                        self.follow(
                            k + 1,
                            parent,
                            &new.name,
                            decided,
                            || s.create(parent, follow_new, follow_flags),
                            true,
                        )
                        .await
                    }
                    Err(e) => Err(e),
                }
            }
        }))
        .await;
        // Each server where it succeeded counts the file as opened; a failed
        // create gets no release from the gateway, so it is released here
        // (else a rolled-back file would hold its space on those servers).
        let opened: Vec<(&Next, FileId)> = std::iter::once((self.first(), decided))
            .chain(self.rest().iter().zip(&rest).filter_map(|(s, r)| Some((s, r.as_ref().ok()?.attr.fid))))
            .collect();
        // What server 0 made when a follower failed: an O_EXCL create is
        // undone (server 0 first, then the followers: a removal in the
        // namespace's order), because a retry must not meet EEXIST for a
        // file its caller was told was not made. Without O_EXCL the file is
        // left as server 0 decided: it may be one that existed before (never
        // deleted), and when we made it, a retry opens it all the same and
        // the heal of the next lookup gives the follower its copy — empty,
        // with server 0's id, permissions and owner, which is all a new file
        // is — where a removal could take a file another gateway's create
        // has opened meanwhile (a risk the O_EXCL undo takes for its clean
        // slate, as a racing unlink would).
        let r = if new.exclusive || rest.iter().all(|r| r.is_ok()) {
            self.finish_create(parent, &new.name, false, first.clone(), rest).await
        } else {
            // server 0's file stays; a follower lacks it
            self.pending.record("create", parent, &new.name);
            Err(pick_error(rest.into_iter().filter_map(|r| r.err())))
        };
        if r.is_err() {
            join_all(opened.into_iter().map(|(s, fid)| async move { s.release(&at(fid)).await })).await;
        }
        r
    }

    /// The follower step on follower `k` after server 0 decided id `d` for
    /// `parent/name`. The name may be taken there: by `d` (a heal of some
    /// gateway made it meanwhile: done), or by a stray server 0 does not
    /// have (a removal it missed, or a losing create's speculative part):
    /// removed when the heal allows it, and the step tried once more.
    /// `opens` when the step is a non-exclusive create, which answers with
    /// (and opens) whatever holds the name.
    pub(crate) async fn follow<'a>(
        &'a self,
        k: usize,
        parent: &'a Loc,
        name: &'a str,
        d: FileId,
        step: impl Fn() -> Fut<'a, Made>,
        opens: bool,
    ) -> FsResult<Made> {
        let s = &self.subvols[k];
        for retry in [false, true] {
            let stray = match step().await {
                Ok(m) if m.attr.fid == d => return Ok(m),
                Ok(m) if opens => {
                    let _ = s.release(&Loc { path: parent.child(name).path, fid: Some(m.attr.fid) }).await;
                    m.attr
                }
                Ok(_) => return Err(FsError::EEXIST),
                // (made by someone else: this server's directory after it is unknown)
                Err(FsError::EEXIST) => match s.lookup(parent, name).await {
                    Ok(a) if a.fid == d => return Ok(Made { attr: a, dir: None }),
                    Ok(a) => a,
                    _ => return Err(FsError::EEXIST),
                },
                Err(e) => return Err(e),
            };
            if retry {
                break;
            }
            // Removed, or left because the name changed under the removal
            // (another gateway's follower step or heal put `d` there
            // meanwhile): either way the step is tried once more, which
            // finds `d` if it is there now.
            self.remove_stray(k, parent, name, stray, 0).await?;
        }
        Err(FsError::EEXIST)
    }

    /// Server 0 failed a create whose speculative part the followers ran
    /// (`spec`): what they made, or may have made (an answer lost), is left
    /// for the heal — recorded so that it does not wait for a walk.
    fn note_strays(&self, parent: &Loc, name: &str, spec: &[FsResult<Made>]) {
        if spec.iter().any(|r| !matches!(r, Err(FsError::EEXIST) | Err(FsError::ENOENT))) {
            self.pending.record("create", parent, name);
        }
    }

    /// Server 0 created `name`; the others answered `rest`. On any failure,
    /// undo the creations that succeeded and report the failure.
    pub(crate) async fn finish_create(
        &self,
        parent: &Loc,
        name: &str,
        dir: bool,
        first: Made,
        rest: Vec<FsResult<Made>>,
    ) -> FsResult<Made> {
        if rest.iter().all(|r| r.is_ok()) {
            let all: Vec<Made> = std::iter::once(first).chain(rest.into_iter().map(|r| r.unwrap_or_else(|_| unreachable!()))).collect();
            let dir = self.dir_after(parent, all.iter().map(|m| m.dir.clone()).collect());
            return Ok(Made { attr: merge_attrs(all.into_iter().map(|m| m.attr).collect())?, dir });
        }
        let err = pick_error(rest.iter().filter_map(|r| r.as_ref().err().copied()));
        // A follower that failed may have made the name all the same (an
        // answer lost), and a rollback may fail: the heal checks it.
        self.pending.record("create", parent, name);
        let created: Vec<&Next> = std::iter::once(self.first())
            .chain(self.rest().iter().zip(&rest).filter(|(_, r)| r.is_ok()).map(|(s, _)| s))
            .collect();
        for s in created {
            let undo = if dir { s.rmdir(parent, name).await } else { s.unlink(parent, name).await };
            if let Err(e) = undo {
                tracing::error!(path = %parent.child(name).path, ?e, "stripe: rollback of a partial create failed; servers differ");
            }
        }
        Err(err)
    }
}
