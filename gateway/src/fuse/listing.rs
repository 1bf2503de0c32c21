//! Answering READDIR and READDIRPLUS: one reply filled from the pipeline's listing.
//!
//! Both walk the open directory's stream (`dir_streams`) the same way: "." and
//! "..", then batches of real entries until the kernel's buffer is full or
//! the listing ends. READDIRPLUS also hands the kernel each entry's
//! attributes, so `ls -l` (or a scan that stats every file) costs one
//! request per batch instead of one LOOKUP per name; the kernel takes a
//! lookup reference on every real entry it is given, which the inode table
//! counts like a LOOKUP. What the listing's attributes do to the memo and
//! the holds is the coherence translator's (its `readdir`).

use super::answer::finish;
use super::convert;
use super::dir_streams::{DirStream, AFTER_DOT, AFTER_DOTDOT};
use coherence::Coherence;
use fuser::{FileType, Generation, INodeNo, ReplyDirectory, ReplyDirectoryPlus};
use std::sync::Arc;
use std::time::Duration;
use xlator::{DirEntry, FsError, FsResult, Loc, Stateful};

/// An open directory's stream, as the FUSE layer finds it by handle.
pub type Stream = Option<Arc<tokio::sync::Mutex<DirStream>>>;

/// Answer a READDIR of directory `ino` (at `loc`) from `offset`. The reply
/// is filled while the listing runs, so it is answered here rather than
/// through `answer`.
pub async fn readdir(co: Arc<Coherence>, loc: FsResult<Loc>, stream: Stream, ino: INodeNo, offset: u64, mut reply: ReplyDirectory) {
    let r = async {
        let (loc, stream) = (loc?, stream.ok_or(FsError::EBADF)?);
        let mut stream = stream.lock().await;
        fill(&co, &loc, &mut stream, offset, false, |item| match item {
            Item::Dot => reply.add(ino, AFTER_DOT, FileType::Directory, "."),
            Item::DotDot => reply.add(INodeNo(1), AFTER_DOTDOT, FileType::Directory, ".."),
            Item::Entry(e, off) => reply.add(INodeNo(e.fid.ino()), off, convert::kind(e.kind), &e.name),
        })
        .await
    };
    let result = r.await;
    finish(reply, result, |r, ()| r.ok());
}

/// Answer a READDIRPLUS: [`readdir`] with each entry's attributes, which
/// the kernel caches as a LOOKUP's (TTL under the ticket taken before the
/// listing is fetched).
pub async fn readdirplus(
    co: Arc<Coherence>,
    loc: FsResult<Loc>,
    stream: Stream,
    ino: INodeNo,
    offset: u64,
    mut reply: ReplyDirectoryPlus,
) {
    let (kc, t) = (co.kernel(), co.kernel().ticket());
    let r = async {
        let (loc, stream) = (loc?, stream.ok_or(FsError::EBADF)?);
        let mut stream = stream.lock().await;
        // The kernel skips the attributes of "." and ".." (it takes
        // no reference on them): any will do.
        let dot = convert::dir_placeholder(ino);
        let gen = Generation(0);
        let mut missing = false;
        fill(&co, &loc, &mut stream, offset, true, |item| match item {
            Item::Dot => reply.add(ino, AFTER_DOT, ".", &Duration::ZERO, &dot, gen),
            Item::DotDot => reply.add(INodeNo(1), AFTER_DOTDOT, "..", &Duration::ZERO, &dot, gen),
            Item::Entry(e, off) => {
                let Some(a) = &e.attr else {
                    missing = true;
                    return true;
                };
                // The kernel holds a lookup reference on what the reply
                // carries: remembered before the TTL is computed (see
                // `Inodes::remember`), and given back if it did not fit.
                co.inodes().remember(ino.0, &loc, &e.name, e.fid);
                let full = reply.add(INodeNo(e.fid.ino()), off, &e.name, &kc.ttl(t, &[ino.0, e.fid.ino()]), &convert::attr(a), gen);
                if full {
                    co.inodes().forget(e.fid.ino(), 1);
                }
                full
            }
        })
        .await?;
        if missing {
            tracing::warn!(dir = %loc.path, "a listing with attributes came back without some; cut short");
        }
        Ok::<_, FsError>(())
    };
    let result = r.await;
    finish(reply, result, |r, ()| r.ok());
}

/// Directory entries asked of the pipeline per call.
const BATCH: u32 = 256;

/// One entry for the reply.
pub enum Item<'a> {
    Dot,
    DotDot,
    /// a real entry and the FUSE offset that continues after it
    Entry(&'a DirEntry, u64),
}

/// Fill a reply: `add` returns true when the kernel's buffer is full (the
/// item was not added). `plus`: ask the graph for attributes too (the
/// coherence translator has what was listed held before it answers).
pub async fn fill(
    co: &Coherence,
    loc: &Loc,
    stream: &mut DirStream,
    offset: u64,
    plus: bool,
    mut add: impl FnMut(Item<'_>) -> bool,
) -> FsResult<()> {
    if offset == 0 && add(Item::Dot) {
        return Ok(());
    }
    if offset <= AFTER_DOT && add(Item::DotDot) {
        return Ok(());
    }
    let start = offset.max(AFTER_DOTDOT);
    let mut cookie = stream.cookie_at(start).ok_or(FsError::EINVAL)?;
    // index of the next real entry
    let mut k = start - AFTER_DOTDOT;
    // Fill the kernel's buffer (glibc asks for 32 KiB at a time), fetching
    // batches until it is full or the listing ends.
    loop {
        let entries = co.readdir(loc, cookie, BATCH, plus).await?;
        let Some(last) = entries.last() else { return Ok(()) };
        cookie = last.next;
        for e in &entries {
            let off = stream.record(k, e.next);
            if add(Item::Entry(e, off)) {
                return Ok(());
            }
            k += 1;
        }
    }
}
