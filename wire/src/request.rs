//! Requests: one variant per file operation of the op table
//! (`xlator::for_each_fop!`, with its opcodes and field names) plus the
//! volume-config messages. A field of type `Data` travels as the bulk.

use crate::codec::{Field, R};
use crate::WireError;
use bytes::{BufMut, Bytes, BytesMut};
use transport::Message;
use volume::CacheConfig;
use xlator::*;

/// Opcodes of the messages that are not file operations (above every fop's).
const GET_VOLUME_CONFIG: u8 = 64;
const SET_VOLUME_CONFIG: u8 = 65;
const POLL: u8 = 66;
/// (67 is the session envelope's: `callback`)
const HOLD: u8 = 68;
const UNHOLD: u8 = 69;
const RECLAIM: u8 = 70;
const RELEASES: u8 = 71;
/// Inodes one `Hold` may name.
pub const MAX_HOLD: usize = 4096;
/// Files one `Releases` may name.
pub const MAX_RELEASES: usize = 1024;

macro_rules! requests {
    ($( $(#[$doc:meta])* $v:ident $m:ident = $code:literal ($($a:ident : $p:ty as $w:ty),*) -> $r:ty; )*) => {
        /// One storage RPC request.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Request {
            $( $v { $($a: $w,)* }, )*
            /// the server's volume config and the fences it asks for
            GetVolumeConfig {},
            /// compare-and-set of the volume config on its epoch
            SetVolumeConfig { config: CacheConfig },
            /// a gateway's kernel-cache lease: renew it, acknowledge the
            /// invalidations up to `acked`, wait (briefly) for new ones
            Poll { session: u64, acked: u64 },
            /// a gateway is about to let its kernel cache these inodes
            /// (`FileId::ino`): from now on a mutation of one waits for its
            /// acknowledgement (see `upcall::leases`)
            Hold { session: u64, inos: Vec<u64> },
            /// the gateway's kernel dropped these inodes: changes need not
            /// wait for it any more
            Unhold { session: u64, inos: Vec<u64> },
            /// a lock one of the gateway's owners was granted before the
            /// server restarted, asked back (see `locks::recovery`)
            Reclaim { loc: Loc, lock: Lock },
            /// the kernel closed these files: a [`Fop::Release`] of each, in
            /// order, in one message (see `coherence::releases`)
            Releases { locs: Vec<Loc> },
        }

        /// What a request asks for, for metrics and logs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op {
            File(Fop),
            GetVolumeConfig,
            SetVolumeConfig,
            Poll,
            Hold,
            Unhold,
            Reclaim,
            Releases,
        }

        impl Request {
            pub fn op(&self) -> Op {
                match self {
                    $(Request::$v { .. } => Op::File(Fop::$v),)*
                    Request::GetVolumeConfig {} => Op::GetVolumeConfig,
                    Request::SetVolumeConfig { .. } => Op::SetVolumeConfig,
                    Request::Poll { .. } => Op::Poll,
                    Request::Hold { .. } => Op::Hold,
                    Request::Unhold { .. } => Op::Unhold,
                    Request::Reclaim { .. } => Op::Reclaim,
                    Request::Releases { .. } => Op::Releases,
                }
            }

            /// Encode into a message; a write's data (or an xattr value)
            /// becomes the bulk without being copied.
            pub fn encode(&self) -> Message {
                let mut w = BytesMut::with_capacity(64);
                let mut bulk = Bytes::new();
                match self {
                    $(
                        Request::$v { $($a,)* } => {
                            w.put_u8($code);
                            $( $a.put(&mut w, &mut bulk); )*
                        }
                    )*
                    Request::GetVolumeConfig {} => w.put_u8(GET_VOLUME_CONFIG),
                    Request::SetVolumeConfig { config } => {
                        w.put_u8(SET_VOLUME_CONFIG);
                        config.put(&mut w, &mut bulk);
                    }
                    Request::Poll { session, acked } => {
                        w.put_u8(POLL);
                        session.put(&mut w, &mut bulk);
                        acked.put(&mut w, &mut bulk);
                    }
                    Request::Hold { session, inos } => {
                        w.put_u8(HOLD);
                        session.put(&mut w, &mut bulk);
                        inos.put(&mut w, &mut bulk);
                    }
                    Request::Unhold { session, inos } => {
                        w.put_u8(UNHOLD);
                        session.put(&mut w, &mut bulk);
                        inos.put(&mut w, &mut bulk);
                    }
                    Request::Reclaim { loc, lock } => {
                        w.put_u8(RECLAIM);
                        loc.put(&mut w, &mut bulk);
                        lock.put(&mut w, &mut bulk);
                    }
                    Request::Releases { locs } => {
                        w.put_u8(RELEASES);
                        locs.put(&mut w, &mut bulk);
                    }
                }
                Message::new(w.freeze(), bulk)
            }

            pub fn decode(msg: &Message) -> Result<Request, WireError> {
                let mut r = R(&msg.head);
                let req = match u8::take(&mut r, &msg.bulk)? {
                    $( $code => Request::$v { $($a: Field::take(&mut r, &msg.bulk)?,)* }, )*
                    GET_VOLUME_CONFIG => Request::GetVolumeConfig {},
                    SET_VOLUME_CONFIG => Request::SetVolumeConfig { config: Field::take(&mut r, &msg.bulk)? },
                    POLL => Request::Poll { session: Field::take(&mut r, &msg.bulk)?, acked: Field::take(&mut r, &msg.bulk)? },
                    HOLD => Request::Hold { session: Field::take(&mut r, &msg.bulk)?, inos: Field::take(&mut r, &msg.bulk)? },
                    UNHOLD => Request::Unhold { session: Field::take(&mut r, &msg.bulk)?, inos: Field::take(&mut r, &msg.bulk)? },
                    RECLAIM => Request::Reclaim { loc: Field::take(&mut r, &msg.bulk)?, lock: Field::take(&mut r, &msg.bulk)? },
                    RELEASES => Request::Releases { locs: Field::take(&mut r, &msg.bulk)? },
                    t => return Err(WireError::BadTag { what: "opcode", tag: t }),
                };
                r.finish()?;
                Ok(req)
            }
        }
    };
}

for_each_fop!(requests);

impl Op {
    /// Every message kind, file operations first.
    pub fn all() -> impl Iterator<Item = Op> {
        Fop::ALL.iter().map(|f| Op::File(*f)).chain([Op::GetVolumeConfig, Op::SetVolumeConfig, Op::Poll, Op::Hold, Op::Unhold, Op::Reclaim, Op::Releases])
    }

    /// Lower-case name, used as the `op` metric label.
    pub fn name(self) -> &'static str {
        match self {
            Op::File(f) => f.name(),
            Op::GetVolumeConfig => "get_volume_config",
            Op::SetVolumeConfig => "set_volume_config",
            Op::Poll => "poll",
            Op::Hold => "hold",
            Op::Unhold => "unhold",
            Op::Reclaim => "reclaim",
            Op::Releases => "releases",
        }
    }
}

impl Request {
    /// The largest reply bulk the caller must accept: the asked size of a
    /// read, an xattr value for getxattr, nothing for the rest.
    pub fn reply_bulk_max(&self) -> usize {
        match self {
            Request::Read { size, .. } => *size as usize,
            Request::Getxattr { .. } => XATTR_SIZE_MAX,
            _ => 0,
        }
    }
}
