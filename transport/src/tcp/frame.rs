//! Frame layout, parsing (no I/O) and the shared read/write loops.

use super::{MAGIC, PROTOCOL_VERSION};
use crate::Message;
use bytes::{Buf, BufMut, Bytes, BytesMut};
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
    if buf.len() < 4 {
        return Decoded::Incomplete(4);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if len < LEN_OVERHEAD {
        return Decoded::Invalid(format!("frame length {len} shorter than its header"));
    }
    if len - LEN_OVERHEAD > max_frame {
        return Decoded::Invalid(format!("frame length {len} exceeds the limit of {max_frame}"));
    }
    if buf.len() < 4 + len {
        return Decoded::Incomplete(4 + len);
    }
    let mut frame = buf.split_to(4 + len).freeze();
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

/// The 8-byte hello: magic, version, and a status (0 = ok).
pub fn hello(status: u16) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&MAGIC);
    h[4..6].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    h[6..8].copy_from_slice(&status.to_le_bytes());
    h
}

/// Parse a peer's hello into (version, status), or say why it is not one.
pub fn parse_hello(h: &[u8; 8]) -> Result<(u16, u16), String> {
    if h[..4] != MAGIC {
        return Err(format!("bad magic {:02x?} (not an IMCa storage RPC peer)", &h[..4]));
    }
    Ok((u16::from_le_bytes([h[4], h[5]]), u16::from_le_bytes([h[6], h[7]])))
}

/// Reads frames from a stream into one growing buffer; each frame's head
/// and bulk are slices of that buffer (no copy after the socket read).
pub struct FrameReader<R> {
    rd: R,
    buf: BytesMut,
    max_frame: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(rd: R, max_frame: usize) -> Self {
        FrameReader { rd, buf: BytesMut::with_capacity(64 * 1024), max_frame }
    }

    /// The next frame; `Err(reason)` when the stream ended or broke (a clean
    /// close between frames reads "closed by peer").
    pub async fn next(&mut self) -> Result<(u64, Message), String> {
        loop {
            match decode(&mut self.buf, self.max_frame) {
                Decoded::Complete(id, msg) => return Ok((id, msg)),
                Decoded::Invalid(why) => return Err(format!("invalid frame: {why}")),
                Decoded::Incomplete(need) => {
                    // Reserve the whole frame at once so a large bulk arrives
                    // in one allocation; keep a floor so small frames batch.
                    let want = need.saturating_sub(self.buf.len()).max(64 * 1024);
                    self.buf.reserve(want);
                }
            }
            match self.rd.read_buf(&mut self.buf).await {
                Ok(0) if self.buf.is_empty() => return Err("closed by peer".into()),
                Ok(0) => return Err(format!("closed by peer mid-frame ({} bytes pending)", self.buf.len())),
                Ok(_) => {}
                Err(e) => return Err(format!("read error: {e}")),
            }
        }
    }
}

/// Write queued frames, flushing only when the queue is momentarily empty, so
/// bursts share syscalls. Ends when every sender is gone or on a write error.
pub async fn write_frames<W>(wr: W, mut rx: mpsc::Receiver<(u64, Message)>) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut wr = BufWriter::with_capacity(256 * 1024, wr);
    while let Some((id, msg)) = rx.recv().await {
        write_one(&mut wr, id, &msg).await?;
        while let Ok((id, msg)) = rx.try_recv() {
            write_one(&mut wr, id, &msg).await?;
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
