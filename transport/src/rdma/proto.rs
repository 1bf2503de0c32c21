//! The bytes RDMA peers exchange: the connection handshake (rdma_cm private
//! data) and the fixed header that starts every Send. No I/O here, so both
//! are unit-tested on any machine.
//!
//! ```text
//! handshake (in the CM REQ and REP; `crate::auth` for the proofs):
//!   0 "IMCH" | 4 u16 version | 6 u16 recv_count | 8 u32 msg_size
//!   | 12 u32 inline_threshold | 16 u8 active_mtu (ibv_mtu) | 17 u8 flags (1: authenticates) | 18..20 zero
//!   | 20 nonce[32]                      (REQ: 52 bytes, within the CM's 56)
//!   | 52 proof[32]                      (REP only: 84 bytes)
//! then, with a volume key, the client's first Send is KIND_AUTH carrying
//! its proof as a 32-byte inline head; the server serves no request before.
//!
//! message header (HEADER_LEN bytes, little-endian), then the inline parts:
//!   0 "IMCR" | 4 u8 kind | 5 u8 flags | 6 u16 credits returned | 8 u64 call id
//!   16 u32 head_len | 20 u32 bulk_len
//!   24 Region read        request: where the server RDMA-Reads the remote part
//!   40 Region reply_bulk  request: where the server may RDMA-Write the reply bulk
//!   56 Region reply_head  request: where the server may RDMA-Write an oversized reply head
//!   72 8 bytes reserved (zero)
//!   80 [head, unless remote/written] [bulk, unless remote/written]
//! Region = u64 addr | u32 rkey | u32 len (len 0 = none)
//! ```

use crate::TransportError;

pub(crate) const HEADER_LEN: usize = 80;
pub(crate) const HELLO_LEN: usize = 20;
/// A client's CM REQ private data: hello and nonce.
pub(crate) const REQ_LEN: usize = HELLO_LEN + 32;
/// A server's CM REP private data: hello, nonce and proof.
pub(crate) const REP_LEN: usize = REQ_LEN + 32;
/// Hello flag: the sender holds the volume's handshake key.
pub(crate) const HF_AUTH: u8 = 1;
const MAGIC: [u8; 4] = *b"IMCR";
const HELLO_MAGIC: [u8; 4] = *b"IMCH";
/// The version in the connection hello; both sides must speak the same.
pub const VERSION: u16 = 9; // 2: nonces, proofs and KIND_AUTH; 3: the `wire` codec of TCP version 5; 4: of TCP version 6; 5: of TCP version 7; 6: of TCP version 8; 7: of TCP version 9; 8: of TCP version 10; 9: of TCP version 11
/// No head or bulk may exceed this (matches the TCP transport's frame cap).
pub(crate) const MAX_PART: u32 = 64 * 1024 * 1024;

pub(crate) const KIND_REQUEST: u8 = 1;
pub(crate) const KIND_REPLY: u8 = 2;
pub(crate) const KIND_CREDIT: u8 = 3;
/// The client's proof of the volume key (inline head of 32 bytes), first.
pub(crate) const KIND_AUTH: u8 = 4;

/// Request: the head is not inline; it starts the `read` region.
pub(crate) const F_HEAD_REMOTE: u8 = 1;
/// Request: the bulk is not inline; it is in the `read` region (after the head if that is remote too).
pub(crate) const F_BULK_REMOTE: u8 = 2;
/// Reply: the head was RDMA-Written into `reply_head`.
pub(crate) const F_HEAD_WRITTEN: u8 = 4;
/// Reply: the bulk was RDMA-Written into `reply_bulk`.
pub(crate) const F_BULK_WRITTEN: u8 = 8;
/// Reply: the reply did not fit what the client advertised; `bulk_len` (or
/// `head_len`) says how much it would have needed; nothing else is carried.
pub(crate) const F_TOO_LARGE: u8 = 16;
const ALL_FLAGS: u8 = 31;

/// A piece of client memory the server may access with one RDMA operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Region {
    pub addr: u64,
    pub rkey: u32,
    pub len: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Header {
    pub kind: u8,
    pub flags: u8,
    pub credits: u16,
    pub id: u64,
    pub head_len: u32,
    pub bulk_len: u32,
    pub read: Region,
    pub reply_bulk: Region,
    pub reply_head: Region,
}

impl Header {
    pub(crate) fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// Bytes of head and bulk that follow the header in the same Send.
    pub(crate) fn inline_len(&self) -> usize {
        let mut n = 0;
        if !self.has(F_HEAD_REMOTE | F_HEAD_WRITTEN) {
            n += self.head_len as usize;
        }
        if !self.has(F_BULK_REMOTE | F_BULK_WRITTEN) {
            n += self.bulk_len as usize;
        }
        n
    }

    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&MAGIC);
        out[4] = self.kind;
        out[5] = self.flags;
        out[6..8].copy_from_slice(&self.credits.to_le_bytes());
        out[8..16].copy_from_slice(&self.id.to_le_bytes());
        out[16..20].copy_from_slice(&self.head_len.to_le_bytes());
        out[20..24].copy_from_slice(&self.bulk_len.to_le_bytes());
        for (i, r) in [self.read, self.reply_bulk, self.reply_head].iter().enumerate() {
            let o = 24 + 16 * i;
            out[o..o + 8].copy_from_slice(&r.addr.to_le_bytes());
            out[o + 8..o + 12].copy_from_slice(&r.rkey.to_le_bytes());
            out[o + 12..o + 16].copy_from_slice(&r.len.to_le_bytes());
        }
        out[72..80].fill(0);
    }

    /// Parse and validate one received Send (`buf` = exactly the bytes received).
    pub(crate) fn decode(buf: &[u8]) -> Result<Header, TransportError> {
        let bad = |why: &str| Err(TransportError::Protocol(why.to_string()));
        if buf.len() < HEADER_LEN {
            return bad(&format!("message of {} bytes is shorter than the header", buf.len()));
        }
        if buf[..4] != MAGIC {
            return bad("bad magic");
        }
        let u32_at = |o: usize| u32::from_le_bytes(buf[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(buf[o..o + 8].try_into().unwrap());
        let region = |o: usize| Region { addr: u64_at(o), rkey: u32_at(o + 8), len: u32_at(o + 12) };
        let h = Header {
            kind: buf[4],
            flags: buf[5],
            credits: u16::from_le_bytes([buf[6], buf[7]]),
            id: u64_at(8),
            head_len: u32_at(16),
            bulk_len: u32_at(20),
            read: region(24),
            reply_bulk: region(40),
            reply_head: region(56),
        };
        if h.flags & !ALL_FLAGS != 0 {
            return bad("unknown flags");
        }
        if h.head_len > MAX_PART || h.bulk_len > MAX_PART {
            return bad("part longer than the maximum");
        }
        let req_flags = F_HEAD_REMOTE | F_BULK_REMOTE;
        match h.kind {
            KIND_REQUEST => {
                if h.flags & !req_flags != 0 {
                    return bad("reply flags on a request");
                }
                if h.has(F_HEAD_REMOTE) && !h.has(F_BULK_REMOTE) && h.bulk_len > 0 {
                    return bad("remote head with inline bulk");
                }
                let mut remote = 0u64;
                if h.has(F_HEAD_REMOTE) {
                    remote += h.head_len as u64;
                }
                if h.has(F_BULK_REMOTE) {
                    remote += h.bulk_len as u64;
                }
                if remote != h.read.len as u64 {
                    return bad("read region does not match the remote parts");
                }
            }
            KIND_REPLY => {
                if h.flags & req_flags != 0 {
                    return bad("request flags on a reply");
                }
            }
            KIND_CREDIT => {
                if h.flags != 0 || h.head_len != 0 || h.bulk_len != 0 {
                    return bad("credit update with a payload");
                }
            }
            KIND_AUTH => {
                if h.flags != 0 || h.head_len != 32 || h.bulk_len != 0 {
                    return bad("an authentication message is a 32-byte proof");
                }
            }
            k => return bad(&format!("unknown message kind {k}")),
        }
        if h.inline_len() != buf.len() - HEADER_LEN {
            return bad(&format!(
                "header announces {} inline bytes, the message carries {}",
                h.inline_len(),
                buf.len() - HEADER_LEN
            ));
        }
        Ok(h)
    }
}

/// What each side proposes in the CM private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub recv_count: u16,
    pub msg_size: u32,
    pub inline_threshold: u32,
    pub active_mtu: u8,
    pub flags: u8,
}

impl Hello {
    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.recv_count.to_le_bytes());
        b[8..12].copy_from_slice(&self.msg_size.to_le_bytes());
        b[12..16].copy_from_slice(&self.inline_threshold.to_le_bytes());
        b[16] = self.active_mtu;
        b[17] = self.flags;
        b
    }

    /// CM pads private data with zeros, so `b` may be longer than HELLO_LEN.
    pub(crate) fn decode(b: &[u8]) -> Result<Hello, String> {
        if b.len() < HELLO_LEN || b[..4] != HELLO_MAGIC {
            return Err("not an IMCa RDMA handshake".into());
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(format!("protocol version mismatch: we speak {VERSION}, the peer speaks {version}"));
        }
        let h = Hello {
            recv_count: u16::from_le_bytes([b[6], b[7]]),
            msg_size: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            inline_threshold: u32::from_le_bytes(b[12..16].try_into().unwrap()),
            active_mtu: b[16],
            flags: b[17],
        };
        if h.recv_count < 2 {
            return Err(format!("peer offers {} receive buffers; at least 2 are needed", h.recv_count));
        }
        if (h.msg_size as usize) < HEADER_LEN + 64 || h.msg_size > 1 << 20 {
            return Err(format!("peer's message size {} is out of range", h.msg_size));
        }
        if !(1..=5).contains(&h.active_mtu) {
            return Err(format!("peer's MTU code {} is not an ibv_mtu", h.active_mtu));
        }
        Ok(h)
    }
}

/// What both sides use after the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// Sends this side may have outstanding (the peer's receive buffers minus
    /// the one reserved for credit updates).
    pub send_credits: u32,
    /// Receive buffers this side keeps posted.
    pub recv_count: u32,
    /// Largest Send either side posts (= every receive buffer's size).
    pub msg_size: u32,
    /// A bulk up to this many bytes travels inline in the Send.
    pub inline_threshold: u32,
    /// Path MTU code (ibv_mtu): the smaller of both ports' active MTUs.
    pub path_mtu: u8,
}

pub(crate) fn agree(local: &Hello, remote: &Hello) -> Agreed {
    let msg_size = local.msg_size.min(remote.msg_size);
    Agreed {
        send_credits: remote.recv_count as u32 - 1,
        recv_count: local.recv_count as u32,
        msg_size,
        inline_threshold: local.inline_threshold.min(remote.inline_threshold).min(msg_size - HEADER_LEN as u32),
        path_mtu: local.active_mtu.min(remote.active_mtu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> Header {
        Header {
            kind: KIND_REQUEST,
            flags: F_BULK_REMOTE,
            credits: 3,
            id: 42,
            head_len: 10,
            bulk_len: 5000,
            read: Region { addr: 0x1000, rkey: 7, len: 5000 },
            reply_bulk: Region { addr: 0x9000, rkey: 8, len: 65536 },
            reply_head: Region::default(),
        }
    }

    #[test]
    fn header_round_trips() {
        let h = req();
        let mut buf = vec![0u8; HEADER_LEN + 10];
        h.encode(&mut buf);
        assert_eq!(Header::decode(&buf).unwrap(), h);
    }

    #[test]
    fn header_rejects_garbage() {
        let h = req();
        let mut buf = vec![0u8; HEADER_LEN + 10];
        h.encode(&mut buf);
        assert!(Header::decode(&buf[..HEADER_LEN + 9]).is_err(), "inline length mismatch");
        assert!(Header::decode(&buf[..20]).is_err(), "short");
        let mut b = buf.clone();
        b[0] = b'X';
        assert!(Header::decode(&b).is_err(), "magic");
        let mut b = buf.clone();
        b[4] = 9;
        assert!(Header::decode(&b).is_err(), "kind");
        let mut b = buf.clone();
        b[5] = F_BULK_WRITTEN;
        assert!(Header::decode(&b).is_err(), "reply flag on request");
        let mut b = buf.clone();
        b[36..40].copy_from_slice(&1u32.to_le_bytes());
        assert!(Header::decode(&b).is_err(), "read region length");
        let mut bad = h;
        bad.bulk_len = MAX_PART + 1;
        bad.read.len = MAX_PART + 1;
        bad.encode(&mut buf);
        assert!(Header::decode(&buf).is_err(), "too long");
    }

    #[test]
    fn hello_round_trips_and_agrees() {
        let a = Hello { recv_count: 16, msg_size: 8192, inline_threshold: 4096, active_mtu: 5, flags: 0 };
        let b = Hello { recv_count: 4, msg_size: 4096, inline_threshold: 8000, active_mtu: 3, flags: HF_AUTH };
        let mut padded = a.encode().to_vec();
        padded.extend_from_slice(&[0; 36]);
        assert_eq!(Hello::decode(&padded).unwrap(), a);
        let g = agree(&a, &b);
        assert_eq!(g.send_credits, 3);
        assert_eq!(g.recv_count, 16);
        assert_eq!(g.msg_size, 4096);
        assert_eq!(g.inline_threshold, 4096 - HEADER_LEN as u32);
        assert_eq!(g.path_mtu, 3);
        assert!(Hello::decode(b"garbage garbage garbage").is_err());
        let mut v = a.encode();
        v[4] = 99;
        assert!(Hello::decode(&v).unwrap_err().contains("version"));
    }
}
