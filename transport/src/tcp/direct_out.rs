//! The write side of a plain-TCP client connection: a call writes its frame
//! to the socket itself.
//!
//! A writer task fed by a queue cost every storage call a thread wake-up
//! before a byte left: a FUSE request runs on its fuser thread until it
//! first waits (`gateway::fuse::first_poll`), so the queue woke a runtime
//! worker only to write. The bank's connections dropped that hop the same
//! way (`cache_bank::stream_out`); this is the storage side of it.
//!
//! A call writes with a non-blocking `write` while nothing waits to go out;
//! what the socket does not take at once is copied to `waiting`, which the
//! flusher task writes when the socket has room. One lock keeps frames
//! whole and in order. Nothing is awaited between the first byte written and
//! the last byte queued, so a call cancelled (timed out, dropped) never
//! leaves half a frame behind; it waits only for room, before writing.
//!
//! Back-pressure: a call waits while more than [`DirectOut::new`]'s `limit`
//! bytes wait to go out (the socket does not drain: a slow or stuck peer).
//! TLS connections keep the writer task (`frame::write_frames`): a TLS
//! stream has no non-blocking write of its own.

use super::frame::encode_header;
use crate::Message;
use bytes::{Buf, BytesMut};
use std::io::{self, IoSlice};
use std::sync::Mutex;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::Notify;

pub struct DirectOut {
    wr: OwnedWriteHalf,
    out: Mutex<Out>,
    /// `waiting` became non-empty (the flusher's)
    more: Notify,
    /// `waiting` drained below `limit`, or the connection broke (the callers')
    room: Notify,
    limit: usize,
}

struct Out {
    /// bytes the socket has not taken yet, in order
    waiting: BytesMut,
    /// the write failed: why
    broken: Option<String>,
}

impl DirectOut {
    /// Writes through `wr`; calls wait while more than `limit` bytes wait.
    pub fn new(wr: OwnedWriteHalf, limit: usize) -> DirectOut {
        DirectOut {
            wr,
            out: Mutex::new(Out { waiting: BytesMut::new(), broken: None }),
            more: Notify::new(),
            room: Notify::new(),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send frame `id` carrying `msg` (or queue what the socket does not
    /// take now). Fails once the connection broke.
    pub async fn send(&self, id: u64, msg: &Message) -> io::Result<()> {
        let header = encode_header(id, msg);
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            // registered before looking, so a drain in between is not missed
            room.as_mut().enable();
            {
                let mut out = self.lock();
                if let Some(why) = &out.broken {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone()));
                }
                if out.waiting.len() < self.limit {
                    return self.write_or_queue(&mut out, [&header[..], &msg.head, &msg.bulk]);
                }
            }
            room.await;
        }
    }

    fn write_or_queue(&self, out: &mut Out, parts: [&[u8]; 3]) -> io::Result<()> {
        let mut sent = 0;
        if out.waiting.is_empty() {
            let slices = parts.map(IoSlice::new);
            match self.wr.try_write_vectored(&slices) {
                Ok(n) => sent = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    self.break_with(out, &e);
                    return Err(e);
                }
            }
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if sent == total {
            return Ok(());
        }
        let was_empty = out.waiting.is_empty();
        let mut skip = sent;
        for p in parts {
            let from = skip.min(p.len());
            out.waiting.extend_from_slice(&p[from..]);
            skip -= from;
        }
        if was_empty {
            self.more.notify_one();
        }
        Ok(())
    }

    /// The connection broke: calls waiting for room fail, and so does the
    /// flusher (whose owner then fails every call awaiting a reply).
    fn break_with(&self, out: &mut Out, e: &io::Error) {
        out.broken.get_or_insert_with(|| e.to_string());
        out.waiting = BytesMut::new();
        self.room.notify_waiters();
        self.more.notify_one();
    }

    /// Write what the calls left waiting whenever the socket has room;
    /// returns the error that broke the connection.
    pub async fn flush_forever(&self) -> io::Error {
        loop {
            self.more.notified().await;
            loop {
                if let Some(why) = &self.lock().broken {
                    return io::Error::new(io::ErrorKind::BrokenPipe, why.clone());
                }
                if let Err(e) = self.wr.writable().await {
                    self.break_with(&mut self.lock(), &e);
                    return e;
                }
                let mut out = self.lock();
                if out.waiting.is_empty() {
                    break;
                }
                match self.wr.try_write(&out.waiting) {
                    Ok(n) => {
                        let before = out.waiting.len();
                        out.waiting.advance(n);
                        if before >= self.limit && out.waiting.len() < self.limit {
                            self.room.notify_waiters();
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        self.break_with(&mut out, &e);
                        return e;
                    }
                }
            }
        }
    }
}
