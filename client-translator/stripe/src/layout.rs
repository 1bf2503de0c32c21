//! Where the bytes of a striped file live.
//!
//! Unit *i* (bytes `[i*unit, (i+1)*unit)`) lives on server `i mod S`, at the
//! same logical offset in that server's copy of the file. The other servers'
//! copies have a hole there, so every server's file is sparse and the
//! logical file size is the largest per-server size.

/// The server that orders a file's changes and decides its locks: the
/// file id's low 64 bits modulo S (ids are random, so files spread evenly),
/// the root's and an unknown id's server 0. Every gateway computes the same
/// index from the same id, whatever the order of its server list's replies.
pub fn ordering_server(fid: Option<xlator::FileId>, servers: usize) -> usize {
    match fid {
        Some(f) if f != xlator::FileId::ROOT && servers > 1 => (f.0 as u64 % servers as u64) as usize,
        _ => 0,
    }
}

/// One contiguous piece of a request that a single server serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Piece {
    pub server: usize,
    /// offset in the file (identical on every server)
    pub offset: u64,
    pub len: usize,
    /// where the piece starts inside the caller's buffer
    pub buf_off: usize,
}

/// Cut `[offset, offset+len)` into per-server pieces, merging neighbours that
/// land on the same server (with one server a request stays one piece).
pub fn pieces(offset: u64, len: usize, unit: u64, servers: usize) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let end = offset.saturating_add(len as u64);
    let mut pos = offset;
    while pos < end {
        let unit_no = pos / unit;
        let unit_end = (unit_no + 1).saturating_mul(unit).min(end);
        let server = (unit_no % servers as u64) as usize;
        let piece_len = (unit_end - pos) as usize;
        match out.last_mut() {
            Some(last) if last.server == server && last.offset + last.len as u64 == pos => {
                last.len += piece_len;
            }
            _ => out.push(Piece { server, offset: pos, len: piece_len, buf_off: (pos - offset) as usize }),
        }
        pos = unit_end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_server_is_the_id_mod_s_and_the_root_is_server_0() {
        use xlator::FileId;
        assert_eq!(ordering_server(Some(FileId::ROOT), 3), 0);
        assert_eq!(ordering_server(None, 3), 0);
        assert_eq!(ordering_server(Some(FileId((7u128 << 100) | 5)), 3), 2);
        assert_eq!(ordering_server(Some(FileId(5)), 1), 0);
    }

    #[test]
    fn one_server_is_one_piece() {
        assert_eq!(pieces(100, 1 << 20, 4096, 1), vec![Piece { server: 0, offset: 100, len: 1 << 20, buf_off: 0 }]);
    }

    #[test]
    fn crosses_unit_boundaries_round_robin() {
        let p = pieces(100, 300, 128, 3);
        assert_eq!(
            p,
            vec![
                Piece { server: 0, offset: 100, len: 28, buf_off: 0 },
                Piece { server: 1, offset: 128, len: 128, buf_off: 28 },
                Piece { server: 2, offset: 256, len: 128, buf_off: 156 },
                Piece { server: 0, offset: 384, len: 16, buf_off: 284 },
            ]
        );
    }

    #[test]
    fn pieces_cover_the_request_exactly() {
        for (off, len, unit, s) in [(0u64, 0usize, 8u64, 2usize), (7, 1, 8, 2), (5 << 32, 999_999, 131072, 4)] {
            let p = pieces(off, len, unit, s);
            assert_eq!(p.iter().map(|x| x.len).sum::<usize>(), len);
            for x in &p {
                assert_eq!(x.offset - off, x.buf_off as u64);
                // a piece never spans two units of different servers
                let first = x.offset / unit;
                let last = (x.offset + x.len as u64 - 1) / unit;
                assert!(s == 1 || first == last);
                assert_eq!((first % s as u64) as usize, x.server);
            }
        }
    }

    #[test]
    fn offsets_past_4_gib() {
        let off = (4u64 << 30) + 5;
        let p = pieces(off, 10, 128 * 1024, 2);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].server, ((off / (128 * 1024)) % 2) as usize);
    }
}
