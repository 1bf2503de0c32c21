//! Kernel-cache callbacks: the session envelope and the invalidations a
//! storage server hands a gateway (see `upcall::leases`).
//!
//! ```text
//!  gateway G ── [SESSION g] op ──> server: applies op, then for every other live
//!                                          session h: queue Invalidation, wait for h's ack
//!  gateway H ── Poll{h, acked} ──> server: answers with H's queued invalidations
//!            <── Callbacks{lease, seq, items}   (H tells its kernel, then polls
//!                                                again with acked = seq)
//! ```
//!
//! A request may travel inside a session envelope (`u8 SESSION, u64 session`
//! before its own head) so the server knows which gateway asks: the asker's
//! own kernel is never called back for its own change (it would deadlock on
//! the pages its own write holds).

use crate::codec::{Dec, Enc, Res, R};
use crate::{Request, WireError};
use bytes::{BufMut, Bytes, BytesMut};
use transport::Message;

/// The opcode of the session envelope (above every other message's).
const SESSION: u8 = 67;

/// "No session": a request from a tool, not a gateway with a kernel cache.
pub const NO_SESSION: u64 = 0;

/// What a gateway must drop from its kernel's caches: defined in xlator,
/// where it travels up the client graph as part of an [`xlator::Upcall`].
pub use xlator::Invalidation;

impl Enc for Invalidation {
    fn enc(&self, w: &mut BytesMut) {
        match self {
            Invalidation::Inode { fid, offset, len } => {
                w.put_u8(1);
                fid.enc(w);
                offset.enc(w);
                len.enc(w);
            }
            Invalidation::Entry { parent, name } => {
                w.put_u8(2);
                parent.enc(w);
                name.enc(w);
            }
            Invalidation::All => w.put_u8(3),
        }
    }
}

impl Dec for Invalidation {
    fn dec(r: &mut R) -> Res<Self> {
        match u8::dec(r)? {
            1 => Ok(Invalidation::Inode { fid: Dec::dec(r)?, offset: Dec::dec(r)?, len: Dec::dec(r)? }),
            2 => Ok(Invalidation::Entry { parent: Dec::dec(r)?, name: Dec::dec(r)? }),
            3 => Ok(Invalidation::All),
            t => Err(WireError::BadTag { what: "invalidation", tag: t }),
        }
    }
}

impl Request {
    /// Encode inside `session`'s envelope (`NO_SESSION`: no envelope).
    pub fn encode_in_session(&self, session: u64) -> Message {
        let inner = self.encode();
        if session == NO_SESSION {
            return inner;
        }
        let mut w = BytesMut::with_capacity(9 + inner.head.len());
        w.put_u8(SESSION);
        w.put_u64_le(session);
        w.extend_from_slice(&inner.head);
        Message::new(w.freeze(), inner.bulk)
    }

    /// A request and the session it came in (`NO_SESSION` if none).
    pub fn decode_in_session(msg: &Message) -> Result<(u64, Request), WireError> {
        if msg.head.first() != Some(&SESSION) {
            return Ok((NO_SESSION, Request::decode(msg)?));
        }
        let mut r = R(&msg.head[1..]);
        let session = u64::dec(&mut r)?;
        if session == NO_SESSION {
            return Err(WireError::BadTag { what: "session", tag: 0 });
        }
        let inner = Message::new(Bytes::copy_from_slice(r.0), msg.bulk.clone());
        if inner.head.first() == Some(&SESSION) {
            return Err(WireError::BadTag { what: "opcode (nested session)", tag: SESSION });
        }
        Ok((session, Request::decode(&inner)?))
    }
}
