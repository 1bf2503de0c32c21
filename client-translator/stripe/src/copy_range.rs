//! A striped server-side copy: copy_file_range(2) made by the storage
//! servers, each between its own copies of the two files, so the bytes never
//! cross the gateway (NFSv4.2's COPY is the model).
//!
//! ```text
//!  copy_range(src, dst, spans)
//!     same file, overlapping ──> EINVAL (as Linux)
//!     a unit's source and destination on different servers ──> EOPNOTSUPP
//!                               (the kernel then copies by reads and writes)
//!     clip to the source's size (getattr: every copy) and to MAX_COPY
//!     cut into units (layout::pieces) ──> ONE request per server with the
//!                               spans whose units it holds; all at once
//!     answer: the contiguous prefix (file order) that landed
//! ```
//!
//! Server k holds unit i of every file when i mod S = k, at the same
//! logical offset. A source unit and the bytes it becomes are on the same
//! server for every unit exactly when the distance between source and
//! destination is a multiple of unit × S; `cp` copies at equal offsets, so
//! whole-file copies always are. With one server every copy is.
//!
//! A server copies each span whole, with zeros past its copy of the source
//! (a unit held elsewhere or a hole), which is why the copy is clipped to the
//! volume's size of the source here: a copy_file_range(2) past the source's
//! end is short, as on a local file system.
//!
//! Limits: the source's size is read before the copy, not with it (a source
//! growing meanwhile may be copied short); a copy that failed on some
//! server answers what landed before the gap, but the servers past the gap
//! may have copied theirs (the destination may hold the new bytes there,
//! and a size grown past the count, unlike a write, which cuts back).

use crate::layout::pieces;
use crate::merge::pick_error;
use crate::Stripe;
use futures::future::join_all;
use xlator::*;

/// Most bytes one copy moves (a copy_file_range(2) is short past it and the
/// application asks again): a bounded time on the servers' disks, well
/// inside the gateways' request timeout, and a bounded request.
pub const MAX_COPY: u64 = 16 << 20;

pub(crate) async fn copy_range(st: &Stripe, src: &Loc, dst: &Loc, spans: &[CopySpan]) -> FsResult<WriteReply> {
    let servers = st.servers();
    if src.fid.is_some() && src.fid == dst.fid && spans.iter().any(CopySpan::overlaps_itself) {
        return Err(FsError::EINVAL);
    }
    if !server_local(spans, st.unit(), servers.len()) {
        // (ENOTSUP is EOPNOTSUPP on Linux: the FUSE kernel falls back to
        // reads and writes on it, and asks again next time; ENOSYS would turn
        // copy_file_range off for the whole mount)
        return Err(FsError::ENOTSUP);
    }
    let size = Translator::getattr(st, src).await?.size;
    let plan = Plan::new(&clip(spans, size, MAX_COPY), st.unit(), servers.len());
    if plan.wanted == 0 {
        return Ok(WriteReply { written: 0, attr: None, size_before: None, blocks_before: None });
    }
    let asked: Vec<usize> = (0..servers.len()).filter(|&k| !plan.spans[k].is_empty()).collect();
    let results = join_all(asked.iter().map(|&k| servers[k].copy_range(src, dst, &plan.spans[k]))).await;
    let mut landed = vec![0u64; servers.len()];
    for (&k, r) in asked.iter().zip(&results) {
        landed[k] = r.as_ref().map_or(0, |w| u64::from(w.written));
    }
    let copied = plan.prefix(&landed);
    if copied < plan.wanted {
        let failed: Vec<usize> = asked.iter().zip(&results).filter(|(_, r)| r.is_err()).map(|(k, _)| *k).collect();
        tracing::warn!(src = %src.path, dst = %dst.path, wanted = plan.wanted, copied, ?failed, "stripe: a copy landed in part");
    }
    if copied == 0 {
        if let Some(e) = results.iter().filter_map(|r| r.as_ref().err().copied()).reduce(|a, b| pick_error([a, b])) {
            return Err(e);
        }
    }
    Ok(WriteReply { written: copied as u32, attr: None, size_before: None, blocks_before: None })
}

/// Whether every byte of `spans` lands on the server that holds its source.
fn server_local(spans: &[CopySpan], unit: u64, servers: usize) -> bool {
    let period = unit.saturating_mul(servers as u64);
    servers == 1 || spans.iter().all(|s| s.len == 0 || s.src % period == s.dst % period)
}

/// `spans` as far as the source (of `size` bytes) has bytes and `max`
/// allows: a copy ends where its first span is cut short.
fn clip(spans: &[CopySpan], size: u64, max: u64) -> Vec<CopySpan> {
    let mut out = Vec::new();
    let mut left = max;
    for s in spans {
        let len = s.len.min(size.saturating_sub(s.src)).min(left);
        if len > 0 {
            out.push(CopySpan { len, ..*s });
        }
        left -= len;
        if len < s.len {
            break;
        }
    }
    out
}

/// A copy cut into units: each server's spans, and in file order which
/// server copies each piece and how long it is.
struct Plan {
    spans: Vec<Vec<CopySpan>>,
    order: Vec<(usize, u64)>,
    wanted: u64,
}

impl Plan {
    fn new(spans: &[CopySpan], unit: u64, servers: usize) -> Plan {
        let mut plan = Plan { spans: vec![Vec::new(); servers], order: Vec::new(), wanted: 0 };
        for s in spans {
            for p in pieces(s.src, s.len as usize, unit, servers) {
                let len = p.len as u64;
                plan.spans[p.server].push(CopySpan { src: p.offset, dst: s.dst + p.buf_off as u64, len });
                plan.order.push((p.server, len));
                plan.wanted += len;
            }
        }
        plan
    }

    /// The bytes landed from the start without a gap, given how many
    /// each server copied (each copies its spans in order, so its count is
    /// a prefix of them).
    fn prefix(&self, landed: &[u64]) -> u64 {
        let mut left = landed.to_vec();
        let mut copied = 0;
        for &(k, len) in &self.order {
            let n = left[k].min(len);
            copied += n;
            left[k] -= n;
            if n < len {
                break;
            }
        }
        copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(src: u64, dst: u64, len: u64) -> CopySpan {
        CopySpan { src, dst, len }
    }

    #[test]
    fn only_a_distance_of_whole_rounds_of_units_is_server_local() {
        assert!(server_local(&[span(0, 0, 1 << 20)], 64 << 10, 2));
        assert!(server_local(&[span(100, 100 + (256 << 10), 1 << 20)], 64 << 10, 2));
        assert!(!server_local(&[span(0, 64 << 10, 1 << 20)], 64 << 10, 2));
        assert!(!server_local(&[span(0, 4096, 10)], 64 << 10, 2));
        assert!(server_local(&[span(0, 4096, 10)], 64 << 10, 1));
    }

    #[test]
    fn a_copy_is_short_at_the_end_of_the_source_and_past_the_bound() {
        assert_eq!(clip(&[span(0, 10, 100)], 60, 1000), [span(0, 10, 60)]);
        assert_eq!(clip(&[span(70, 10, 100)], 60, 1000), []);
        assert_eq!(clip(&[span(0, 10, 100), span(200, 0, 5)], 60, 1000), [span(0, 10, 60)]);
        assert_eq!(clip(&[span(0, 10, 100), span(20, 500, 50)], 1000, 120), [span(0, 10, 100), span(20, 500, 20)]);
    }

    #[test]
    fn each_server_gets_the_units_it_holds_and_the_prefix_stops_at_a_gap() {
        // units of 10 on 2 servers, a copy 40 further on
        let plan = Plan::new(&[span(5, 45, 30)], 10, 2);
        assert_eq!(plan.spans[0], [span(5, 45, 5), span(20, 60, 10)]);
        assert_eq!(plan.spans[1], [span(10, 50, 10), span(30, 70, 5)]);
        assert_eq!(plan.wanted, 30);
        assert_eq!(plan.prefix(&[15, 15]), 30);
        // server 1 copied its first span only: the prefix stops at its second
        assert_eq!(plan.prefix(&[15, 10]), 25);
        // server 0 copied nothing: nothing counts
        assert_eq!(plan.prefix(&[0, 15]), 0);
    }
}
