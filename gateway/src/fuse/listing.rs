//! Filling one READDIR or READDIRPLUS reply from the pipeline's listing.
//!
//! Both walk the open directory's stream (`dirs`) the same way: "." and
//! "..", then batches of real entries until the kernel's buffer is full or
//! the listing ends. READDIRPLUS also hands the kernel each entry's
//! attributes, so `ls -l` (or a scan that stats every file) costs one
//! request per batch instead of one LOOKUP per name; the kernel takes a
//! lookup reference on every real entry it is given, which the inode table
//! counts like a LOOKUP.

use super::dirs::{DirStream, AFTER_DOT, AFTER_DOTDOT};
use xlator::{DirEntry, FsError, FsResult, Loc, Next};

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
/// item was not added). `plus`: ask the pipeline for attributes too.
pub async fn fill(
    xl: &Next,
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
        let entries = xl.readdir(loc, cookie, BATCH, plus).await?;
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
