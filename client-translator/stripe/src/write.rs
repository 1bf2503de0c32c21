//! A striped write, and what is left when some of its pieces fail.
//!
//! ```text
//!  write [off, off+len) ──> pieces to every server at once (layout::pieces)
//!       all landed ──> the count
//!       some failed ──> count = the contiguous prefix that landed (file order)
//!                       cut back every server copy that this write grew past
//!                       max(its old size, off + count)   (setattr size)
//!                       answer: the count, or the first failure's error if 0
//! ```
//!
//! Why: the pieces land independently, so with one server full (ENOSPC) or
//! gone (EIO) the others' units still land. Left alone, they grow the file
//! past the failed unit, which then reads as zeros inside a size the
//! application never wrote — and the application, told "error" or a short
//! count, has no way to know. Each server's write reply carries its copy's
//! size just before ([`WriteReply::size_before`], from posix), so the cut
//! back needs no extra round trip on the path that succeeds.
//!
//! What the caller can count on (docs/design.md, "Partial writes"): the
//! file's size afterwards is its old size, or `off + count` if that is
//! larger; the counted bytes are the new data; no byte inside the old size
//! turned into a zero it did not hold. Bytes past the count but inside the
//! old size may hold old or new data (an overwrite cannot be taken back
//! without reading it first), as after a torn write on a local disk.
//!
//! A write some of whose pieces failed is counted
//! (`imca_gateway_writes_failed_partway_total`) and logged once per file
//! (its id and path), whatever it answered: its range may now hold old
//! data, new data or a mix, unit by unit (docs/operations.md, "A write
//! that failed part-way"), and the operator can find the file.
//!
//! Limits: a server that answered EIO because it went away may or may not
//! have applied its piece, and cannot be cut back now; a cut back whose own
//! setattr fails is logged. A server whose copy changed size since our write
//! (another gateway extending the same file at that moment) is left alone.

use crate::layout::{self, Piece};
use crate::merge::pick_error;
use crate::Stripe;
use futures::future::join_all;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use xlator::*;

/// How many files whose failed write was logged are remembered: a server
/// down under a busy writer fails every write, and one line per file is
/// what the operator needs.
const LOGGED: usize = 4096;

/// The files whose failed write was logged already.
pub(crate) struct Logged(Mutex<LruCache<FileId, ()>>);

impl Logged {
    pub fn new() -> Logged {
        Logged(Mutex::new(LruCache::new(NonZeroUsize::new(LOGGED).unwrap_or(NonZeroUsize::MIN))))
    }

    /// True the first time `fid` is seen (lately).
    fn first(&self, fid: FileId) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).put(fid, ()).is_none()
    }
}

pub(crate) async fn write(st: &Stripe, loc: &Loc, offset: u64, data: Data) -> FsResult<WriteReply> {
    let servers = st.servers();
    let pieces = layout::pieces(offset, data.len(), st.unit(), servers.len());
    let results = join_all(
        pieces.iter().map(|p| servers[p.server].write(loc, p.offset, data.slice(p.buf_off..p.buf_off + p.len))),
    )
    .await;
    let (written, stopped_by) = landed_prefix(&pieces, &results);
    if written as usize == data.len() {
        let (attr, blocks_before) = written_copies(&pieces, &results).unzip();
        return Ok(WriteReply { written, attr, size_before: None, blocks_before });
    }
    let end = offset + u64::from(written);
    tracing::debug!(path = %loc.path, offset, len = data.len(), written, ?stopped_by, "stripe: a write landed in part");
    note_failed(st, loc, offset, data.len(), written, &pieces, &results);
    join_all(
        (0..servers.len())
            .filter_map(|k| Some((k, cut_back_to(k, written > 0, end, &pieces, &results)?)))
            .map(|(k, (keep, grew_to))| cut_back(k, &servers[k], loc, keep, grew_to)),
    )
    .await;
    if written > 0 {
        return Ok(WriteReply { written, attr: None, size_before: None, blocks_before: None });
    }
    Err(stopped_by.unwrap_or_else(|| pick_error(results.iter().filter_map(|r| r.as_ref().err().copied()))))
}

/// Count a write some of whose pieces failed, and log its file once.
fn note_failed(st: &Stripe, loc: &Loc, offset: u64, len: usize, written: u32, pieces: &[Piece], results: &[FsResult<WriteReply>]) {
    let mut failed: Vec<usize> = pieces.iter().zip(results).filter(|(_, r)| r.is_err()).map(|(p, _)| p.server).collect();
    if failed.is_empty() {
        return; // a short write (a full server said how much it took): nothing unknown
    }
    failed.dedup();
    st.pending.metrics.writes_failed_partway.inc();
    let fid = loc.fid.map(|f| format!("{:032x}", f.0)).unwrap_or_default();
    if loc.fid.is_none_or(|f| st.torn_logged.first(f)) {
        tracing::error!(
            path = %loc.path,
            fid,
            offset,
            len,
            written,
            failed_servers = ?failed,
            "stripe: a write failed on some servers: past the bytes it reported, its range may hold old data, new data or a mix (docs/operations.md); logged once per file"
        );
    }
}

/// The copies a write that landed whole reached, merged after it (xlator's
/// rule: size the largest, blocks the sum, times the latest), and their
/// blocks before it:
/// what the gateway needs to redo the volume's merge from the attributes it
/// had (`WriteReply::attr_after`). None when a server did not say, or the
/// copies disagree on what a write leaves alone.
///
/// A server may get several pieces at once, each answering with a stat
/// before and after its own: the one taken first (the smallest blocks
/// before; a write only adds blocks) precedes all of them, and the one
/// taken last (the largest after) follows them all.
fn written_copies(pieces: &[Piece], results: &[FsResult<WriteReply>]) -> Option<(Attr, u64)> {
    let mut out: Option<Attr> = None;
    let (mut after, mut before) = (0u64, 0u64);
    let mut servers: Vec<usize> = pieces.iter().map(|p| p.server).collect();
    servers.sort_unstable();
    servers.dedup();
    for k in servers {
        let (mut k_after, mut k_before) = (0u64, u64::MAX);
        for (_, r) in pieces.iter().zip(results).filter(|(p, _)| p.server == k) {
            let r = r.as_ref().ok()?;
            let a = r.attr.as_ref()?;
            k_before = k_before.min(r.blocks_before?);
            k_after = k_after.max(a.blocks);
            match &mut out {
                None => out = Some(a.clone()),
                Some(o) => {
                    if !o.same_but_written(a) {
                        return None;
                    }
                    o.merge_size_and_times(a);
                }
            }
        }
        after += k_after;
        before += k_before;
    }
    let mut out = out?;
    out.blocks = after;
    Some((out, before))
}

/// Bytes landed from the start of the request without a gap (a failed or
/// short piece ends them), and the error of the piece that ended them.
fn landed_prefix(pieces: &[Piece], results: &[FsResult<WriteReply>]) -> (u32, Option<FsError>) {
    let mut written = 0u32;
    for (p, r) in pieces.iter().zip(results) {
        match r {
            Ok(w) => {
                written += w.written.min(p.len as u32);
                if (w.written as usize) < p.len {
                    return (written, None);
                }
            }
            Err(e) => return (written, Some(*e)),
        }
    }
    (written, None)
}

/// Whether server `k`'s copy must be cut back, and to what: `Some((keep,
/// grew_to))` when one of its pieces landed bytes past both the prefix end
/// `end` (if anything landed; else past nothing but its old size) and its
/// copy's old size. `grew_to` is the copy's size after our pieces, when the
/// servers said.
fn cut_back_to(k: usize, landed: bool, end: u64, pieces: &[Piece], results: &[FsResult<WriteReply>]) -> Option<(u64, Option<u64>)> {
    let mine = || pieces.iter().zip(results).filter(move |(p, _)| p.server == k);
    // The furthest byte its pieces put on disk.
    let landed_end = mine().filter_map(|(p, r)| Some(p.offset + u64::from(r.as_ref().ok()?.written))).max()?;
    // The copy's size before our first piece reached it: the smallest any
    // of them saw (they run at once, so later ones may see earlier ones').
    let befores: Vec<Option<u64>> = mine().filter_map(|(_, r)| Some(r.as_ref().ok()?.size_before)).collect();
    let before = match befores.iter().copied().collect::<Option<Vec<u64>>>() {
        Some(b) => b.into_iter().min()?,
        None => {
            tracing::warn!(server = k, "stripe: a partly failed write cannot be cut back: the server did not say its old size");
            return None;
        }
    };
    let keep = if landed { before.max(end) } else { before };
    if landed_end <= keep {
        return None;
    }
    let grew_to = mine().filter_map(|(_, r)| Some(r.as_ref().ok()?.attr.as_ref()?.size)).max();
    Some((keep, grew_to))
}

/// Truncate one server's copy to `keep`, unless its size is no longer the
/// one our write left (`grew_to`): then someone else wrote meanwhile and
/// their bytes are not ours to cut.
async fn cut_back(k: usize, server: &Next, loc: &Loc, keep: u64, grew_to: Option<u64>) {
    if let Some(ours) = grew_to {
        match server.getattr(loc).await {
            Ok(a) if a.size == ours => {}
            Ok(a) => {
                tracing::warn!(server = k, path = %loc.path, size = a.size, ours, "stripe: not cutting back a partly failed write: the copy changed meanwhile");
                return;
            }
            Err(e) => {
                tracing::warn!(server = k, path = %loc.path, ?e, "stripe: cannot cut back a partly failed write");
                return;
            }
        }
    }
    let set = SetAttr { size: Some(keep), ..Default::default() };
    if let Err(e) = server.setattr(loc, &set).await {
        tracing::error!(server = k, path = %loc.path, keep, ?e, "stripe: cutting back a partly failed write failed; the file may hold zeros past the written range");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(written: u32, before: u64, after: u64) -> FsResult<WriteReply> {
        let t = Timestamp::default();
        let attr = Attr {
            fid: FileId::ROOT,
            kind: FileKind::File,
            size: after,
            // (one block a byte: enough to follow what adds up)
            blocks: after,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            atime: t,
            mtime: t,
            ctime: t,
        };
        Ok(WriteReply { written, attr: Some(attr), size_before: Some(before), blocks_before: Some(before) })
    }

    #[test]
    fn the_prefix_stops_at_the_first_gap() {
        let p = layout::pieces(0, 40, 10, 2);
        let r = vec![ok(10, 0, 10), ok(10, 0, 20), ok(5, 10, 25), ok(10, 20, 40)];
        assert_eq!(landed_prefix(&p, &r), (25, None));
        let r = vec![ok(10, 0, 10), Err(FsError::ENOSPC), ok(10, 10, 30), ok(10, 20, 40)];
        assert_eq!(landed_prefix(&p, &r), (10, Some(FsError::ENOSPC)));
    }

    #[test]
    fn only_growth_past_the_prefix_and_the_old_size_is_cut() {
        // Units of 10 on 2 servers; old sizes 25 (s0) and 20 (s1).
        let p = layout::pieces(10, 40, 10, 2); // s1@10, s0@20, s1@30, s0@40
        let r = vec![ok(10, 20, 20), ok(10, 25, 30), Err(FsError::ENOSPC), ok(10, 30, 50)];
        // 20 bytes landed: [10, 30). s0 grew to 50: cut to max(25, 30).
        assert_eq!(landed_prefix(&p, &r).0, 20);
        assert_eq!(cut_back_to(0, true, 30, &p, &r), Some((30, Some(50))));
        assert_eq!(cut_back_to(1, true, 30, &p, &r), None, "s1 landed nothing past the prefix");
        // Nothing landed: every copy goes back to its own old size.
        let r = vec![Err(FsError::ENOSPC), ok(10, 25, 30), Err(FsError::ENOSPC), ok(10, 25, 50)];
        assert_eq!(cut_back_to(0, false, 10, &p, &r), Some((25, Some(50))));
        // An overwrite inside the old size is not cut (it cannot be undone).
        let r = vec![Err(FsError::ENOSPC), ok(10, 60, 60), Err(FsError::ENOSPC), ok(10, 60, 60)];
        assert_eq!(cut_back_to(0, false, 10, &p, &r), None);
        // Unknown old size: left alone (and logged).
        let r = vec![Err(FsError::ENOSPC), Ok(WriteReply { written: 10, attr: None, size_before: None, blocks_before: None }), Err(FsError::EIO), ok(10, 25, 50)];
        assert_eq!(cut_back_to(0, false, 10, &p, &r), None);
    }

    #[test]
    fn a_whole_write_tells_how_the_copies_it_reached_moved() {
        // Units of 10 on 2 servers: s1@10, s0@20, s1@30, s0@40. Server 1's
        // two pieces ran at once (both saw 20 before, 40 after); server 0's
        // one after the other.
        let p = layout::pieces(10, 40, 10, 2);
        let r = vec![ok(10, 20, 40), ok(10, 25, 30), ok(10, 20, 40), ok(10, 30, 50)];
        let (a, before) = written_copies(&p, &r).unwrap();
        assert_eq!((a.size, a.blocks, before), (50, 40 + 50, 20 + 25));
        // A server that did not say: nothing.
        let mut r2 = r.clone();
        r2[3] = Ok(WriteReply { written: 10, attr: None, size_before: None, blocks_before: None });
        assert_eq!(written_copies(&p, &r2), None);
        // Copies that disagree on what a write leaves alone: nothing.
        let mut r3 = r;
        if let Ok(w) = &mut r3[0] {
            w.attr.as_mut().unwrap().perm = 0o600;
        }
        assert_eq!(written_copies(&p, &r3), None);
    }
}
