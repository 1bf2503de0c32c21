//! Frame layout, the hello, parsing (no I/O) and the shared read/write loops.

use super::activity::Activity;
use super::budget::{Budget, Reservation};
use super::{MAGIC, PROTOCOL_VERSION};
use crate::Message;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

/// `u32 len | u64 id | u32 head_len`
pub const HEADER_LEN: usize = 16;
/// Bytes counted by `len` that are not head or bulk (`id` and `head_len`).
const LEN_OVERHEAD: usize = 12;

/// Outcome of trying to parse one frame from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    Complete(u64, Message),
    /// more bytes are needed; `usize` is how many in total the frame needs
    Incomplete(usize),
    Invalid(String),
}

/// Parse one frame from the front of `buf`, splitting it off on success. The
/// head and bulk are slices of the same frozen buffer (no copies).
pub fn decode(buf: &mut BytesMut, max_frame: usize) -> Decoded {
    let total = match peek_len(buf, max_frame) {
        Ok(Some(t)) => t,
        Ok(None) => return Decoded::Incomplete(4),
        Err(why) => return Decoded::Invalid(why),
    };
    if buf.len() < total {
        return Decoded::Incomplete(total);
    }
    let mut frame = buf.split_to(total).freeze();
    frame.advance(4);
    let id = frame.get_u64_le();
    let head_len = frame.get_u32_le() as usize;
    if head_len > frame.len() {
        return Decoded::Invalid(format!("head length {head_len} exceeds frame body {}", frame.len()));
    }
    let head = frame.split_to(head_len);
    Decoded::Complete(id, Message { head, bulk: frame })
}

/// The fixed-size part of a frame (what precedes head and bulk).
pub fn encode_header(id: u64, msg: &Message) -> [u8; HEADER_LEN] {
    let len = (LEN_OVERHEAD + msg.head.len() + msg.bulk.len()) as u32;
    let mut h = [0u8; HEADER_LEN];
    let mut w = &mut h[..];
    w.put_u32_le(len);
    w.put_u64_le(id);
    w.put_u32_le(msg.head.len() as u32);
    h
}

/// A hello's length (version 4 on).
pub const HELLO_LEN: usize = 88;
/// Where a hello's proof starts (what the server's proof covers of its own hello).
pub const HELLO_PROOF_AT: usize = 56;
/// A client's proof of the volume secret, sent after the server's hello.
pub const PROOF_LEN: usize = 32;
/// What every version's hello starts with, all a refusal carries, and the
/// server's final verdict: magic, version, status.
pub const HELLO_PREFIX: usize = 8;
pub const STATUS_OK: u16 = 0;
/// The peer speaks another protocol version.
pub const STATUS_VERSION: u16 = 1;
/// Every connection slot is busy.
pub const STATUS_BUSY: u16 = 2;
/// The server needs volume credentials and the client offered none.
pub const STATUS_AUTH_REQUIRED: u16 = 3;
/// The client's proof did not verify (another volume's secret, or none).
pub const STATUS_AUTH_FAILED: u16 = 4;
/// The server speaks TLS and the client did not (sent in plain text).
pub const STATUS_TLS_REQUIRED: u16 = 5;
/// Hello flag: the sender holds the volume's handshake key and authenticates.
pub const F_AUTH: u32 = 1;

/// One side's hello: who it is, what it accepts, and its challenge.
///
/// ```text
///  0 "IMCA" | 4 u16 version | 6 u16 status | 8 u32 max_frame | 12 u32 idle_timeout_ms
///  16 u32 flags | 20 u32 0 | 24 nonce[32] | 56 proof[32] (server; zero from a client)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub status: u16,
    /// the largest frame (head + bulk) the sender accepts
    pub max_frame: u32,
    /// a server closes a quiet connection after this long (0 = never)
    pub idle_timeout_ms: u32,
    pub flags: u32,
    /// the sender's fresh challenge
    pub nonce: [u8; 32],
    /// a server's proof that it holds the volume's key (`crate::auth`)
    pub proof: [u8; 32],
}

impl Hello {
    /// Our hello, offering these limits (no challenge yet).
    pub fn ours(max_frame: usize, idle_timeout: Option<Duration>) -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            status: STATUS_OK,
            max_frame: max_frame.min(u32::MAX as usize) as u32,
            idle_timeout_ms: idle_timeout.map_or(0, |t| t.as_millis().clamp(1, u32::MAX as u128) as u32),
            flags: 0,
            nonce: [0; 32],
            proof: [0; 32],
        }
    }

    /// A refusal or a verdict (sent as its first `HELLO_PREFIX` bytes only,
    /// which any version reads).
    pub fn refusal(status: u16) -> Hello {
        Hello { status, ..Hello::ours(0, None) }
    }

    /// The server's verdict after the proofs: the 8-byte prefix, always.
    pub fn verdict(status: u16) -> [u8; HELLO_PREFIX] {
        let mut v = [0u8; HELLO_PREFIX];
        v.copy_from_slice(&Hello::refusal(status).encode()[..HELLO_PREFIX]);
        v
    }

    pub fn authenticates(&self) -> bool {
        self.flags & F_AUTH != 0
    }

    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut h = [0u8; HELLO_LEN];
        h[..4].copy_from_slice(&MAGIC);
        h[4..6].copy_from_slice(&self.version.to_le_bytes());
        h[6..8].copy_from_slice(&self.status.to_le_bytes());
        h[8..12].copy_from_slice(&self.max_frame.to_le_bytes());
        h[12..16].copy_from_slice(&self.idle_timeout_ms.to_le_bytes());
        h[16..20].copy_from_slice(&self.flags.to_le_bytes());
        h[24..56].copy_from_slice(&self.nonce);
        h[56..88].copy_from_slice(&self.proof);
        h
    }

    /// The bytes to send: a whole hello, or the prefix of a refusal.
    pub fn wire(&self) -> Vec<u8> {
        let n = if self.status == STATUS_OK { HELLO_LEN } else { HELLO_PREFIX };
        self.encode()[..n].to_vec()
    }

    /// The idle timeout the peer announced, if any.
    pub fn idle_timeout(&self) -> Option<Duration> {
        (self.idle_timeout_ms > 0).then(|| Duration::from_millis(self.idle_timeout_ms as u64))
    }
}

/// Read a peer's hello: the prefix, and the rest when it is an accepting
/// hello of our version (anything else is all a peer sends, so reading on
/// would wait for bytes that never come). Also reads a verdict, with
/// `prefix_only`.
pub async fn read_hello<R: AsyncRead + Unpin>(rd: &mut R) -> std::io::Result<Result<Hello, String>> {
    read_hello_or_verdict(rd, false).await
}

/// The server's last word before frames: "IMCA", version, status.
pub async fn read_verdict<R: AsyncRead + Unpin>(rd: &mut R) -> std::io::Result<Result<Hello, String>> {
    read_hello_or_verdict(rd, true).await
}

async fn read_hello_or_verdict<R: AsyncRead + Unpin>(
    rd: &mut R,
    prefix_only: bool,
) -> std::io::Result<Result<Hello, String>> {
    let mut h = [0u8; HELLO_LEN];
    rd.read_exact(&mut h[..HELLO_PREFIX]).await?;
    if h[..4] != MAGIC {
        return Ok(Err(format!("bad magic {:02x?} (not an IMCa storage RPC peer)", &h[..4])));
    }
    let word = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
    let (version, status) = (word(4), word(6));
    if !prefix_only && version == PROTOCOL_VERSION && status == STATUS_OK {
        rd.read_exact(&mut h[HELLO_PREFIX..]).await?;
    }
    let long = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let mut nonce = [0u8; 32];
    let mut proof = [0u8; 32];
    nonce.copy_from_slice(&h[24..56]);
    proof.copy_from_slice(&h[56..88]);
    Ok(Ok(Hello { version, status, max_frame: long(8), idle_timeout_ms: long(12), flags: long(16), nonce, proof }))
}

/// How a frame stream ended.
#[derive(Debug)]
pub enum ReadEnd {
    /// closed by the peer between frames
    Closed,
    /// closed by the peer with this many bytes of a frame pending
    MidFrame(usize),
    Invalid(String),
    Io(std::io::Error),
}

impl std::fmt::Display for ReadEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadEnd::Closed => write!(f, "closed by peer"),
            ReadEnd::MidFrame(n) => write!(f, "closed by peer mid-frame ({n} bytes pending)"),
            ReadEnd::Invalid(why) => write!(f, "invalid frame: {why}"),
            ReadEnd::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

/// Frames up to this size are read into one reused buffer and copied out;
/// a larger one gets a buffer of exactly its size, which becomes its bulk
/// (no copy after the socket read).
const FLOOR: usize = 64 * 1024;
/// Read at least this much at once while collecting small frames.
const MIN_READ: usize = 4 * 1024;

/// Reads frames from a stream. With a budget (the server), each frame's
/// bytes are reserved as soon as its header shows its length, before the
/// rest of it is read, and handed out with the frame.
pub struct FrameReader<R> {
    rd: R,
    buf: BytesMut,
    max_frame: usize,
    budget: Option<(Budget, Arc<Activity>)>,
    /// the reservation for the frame at the front of `buf`
    held: Option<Reservation>,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(rd: R, max_frame: usize) -> Self {
        FrameReader { rd, buf: BytesMut::with_capacity(FLOOR), max_frame, budget: None, held: None }
    }

    pub(super) fn budgeted(rd: R, max_frame: usize, budget: Budget, act: Arc<Activity>) -> Self {
        FrameReader { budget: Some((budget, act)), ..FrameReader::new(rd, max_frame) }
    }

    /// The next frame and the bytes reserved for it. Cancel-safe: nothing
    /// read or reserved is lost when the future is dropped.
    pub async fn next(&mut self) -> Result<(u64, Message, Reservation), ReadEnd> {
        loop {
            let total = peek_len(&self.buf, self.max_frame).map_err(ReadEnd::Invalid)?;
            if let (Some(total), None, Some((budget, act))) = (total, &self.held, &self.budget) {
                let _waiting = act.waiting_for_budget();
                self.held = Some(budget.reserve(total).await);
            }
            match total {
                Some(total) if self.buf.len() >= total => {
                    let mut frame = if total <= FLOOR {
                        let f = BytesMut::from(&self.buf[..total]);
                        self.buf.advance(total);
                        f
                    } else {
                        self.buf.split_to(total)
                    };
                    self.set_partial();
                    let held = self.held.take().unwrap_or_default();
                    return match decode(&mut frame, self.max_frame) {
                        Decoded::Complete(id, msg) => Ok((id, msg, held)),
                        Decoded::Invalid(why) => Err(ReadEnd::Invalid(why)),
                        Decoded::Incomplete(_) => unreachable!("the whole frame is buffered"),
                    };
                }
                Some(total) if total > FLOOR => {
                    if self.buf.capacity() < total {
                        // exactly the frame's size, so what is reserved is what is allocated
                        let mut exact = BytesMut::with_capacity(total);
                        exact.extend_from_slice(&self.buf);
                        self.buf = exact;
                    }
                }
                _ => {
                    if self.buf.capacity() - self.buf.len() < MIN_READ {
                        self.buf.reserve(FLOOR);
                    }
                }
            }
            match self.rd.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return Err(ReadEnd::Closed),
                Ok(0) => return Err(ReadEnd::MidFrame(self.buf.len())),
                Ok(_) => {
                    if let Some((_, act)) = &self.budget {
                        act.received();
                    }
                    self.set_partial();
                }
                Err(e) => return Err(ReadEnd::Io(e)),
            }
        }
    }

    fn set_partial(&self) {
        if let Some((_, act)) = &self.budget {
            act.partial.store(!self.buf.is_empty(), Relaxed);
        }
    }
}

/// The whole length of the frame at the front of `buf` (with its length
/// field), once its length field is there; an error if it cannot be valid.
fn peek_len(buf: &[u8], max_frame: usize) -> Result<Option<usize>, String> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len < LEN_OVERHEAD {
        return Err(format!("frame length {len} shorter than its header"));
    }
    if len - LEN_OVERHEAD > max_frame {
        return Err(format!("frame length {len} exceeds the limit of {max_frame}"));
    }
    Ok(Some(4 + len))
}

/// Write queued frames, flushing only when the queue is momentarily empty, so
/// bursts share syscalls. Each frame's `H` (what it holds: budget, slots) is
/// dropped once the frame is handed to the socket. Ends when every sender is
/// gone or on a write error.
pub async fn write_frames<W, H>(wr: W, mut rx: mpsc::Receiver<(u64, Message, H)>) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut wr = BufWriter::with_capacity(256 * 1024, wr);
    while let Some((id, msg, held)) = rx.recv().await {
        write_one(&mut wr, id, &msg).await?;
        drop((msg, held));
        while let Ok((id, msg, held)) = rx.try_recv() {
            write_one(&mut wr, id, &msg).await?;
            drop((msg, held));
        }
        wr.flush().await?;
    }
    wr.shutdown().await
}

async fn write_one<W: AsyncWrite + Unpin>(wr: &mut BufWriter<W>, id: u64, msg: &Message) -> std::io::Result<()> {
    wr.write_all(&encode_header(id, msg)).await?;
    wr.write_all(&msg.head).await?;
    // BufWriter hands writes larger than its buffer straight to the socket.
    wr.write_all(&msg.bulk).await
}

#[allow(dead_code)]
pub(crate) fn encode_frame(id: u64, msg: &Message) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER_LEN + msg.head.len() + msg.bulk.len());
    b.put_slice(&encode_header(id, msg));
    b.put_slice(&msg.head);
    b.put_slice(&msg.bulk);
    b.freeze()
}
