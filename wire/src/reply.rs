//! Replies. Every reply head starts with the server's volume epoch, then
//! either an errno or one of the reply shapes below.

use crate::callback::Invalidation;
use crate::codec::{Dec, Enc, R};
use crate::WireError;
use bytes::{BufMut, Bytes, BytesMut};
use transport::Message;
use volume::CacheConfig;
use xlator::*;

/// The successful outcome of a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// open, release, flush, fsync, setxattr, removexattr
    Unit,
    /// lookup, getattr, setattr, fallocate
    Attr(Attr),
    /// mknod, mkdir, create, symlink, link
    Made(Made),
    /// readlink
    Target(String),
    Removed(Removed),
    Renamed(Renamed),
    /// read, getxattr (travels as bulk)
    Data(Bytes),
    Written(WriteReply),
    Entries(Vec<DirEntry>),
    StatFs(StatFs),
    /// listxattr
    Names(Vec<String>),
    /// get/set volume config: whether a set was accepted, and the config the
    /// server keeps now (the new one if accepted, else the current one), and
    /// the cache nodes this server asks to have fenced (see
    /// `volume::FenceRequests`)
    Config { accepted: bool, config: CacheConfig, fence: Vec<String> },
    /// poll: the kernel-cache lease granted (counted from when the poll was
    /// sent), the sequence number of the last item, whether the server did
    /// not know the session (it restarted, or forgot an expired one: the
    /// gateway may have missed invalidations), and the invalidations
    Callbacks { lease_ms: u32, seq: u64, fresh: bool, items: Vec<Invalidation> },
    /// getlk: the lock that blocks the one asked about (or it, unlocked)
    Lock(Lock),
    /// getattrs: one per object asked about, None where it failed
    Attrs(Vec<Option<Attr>>),
    /// names: a listing without its objects
    DirNames(Vec<DirName>),
    /// hold: the sequence number of the last invalidation queued for the
    /// session when the inodes were recorded (once the gateway applied
    /// that far, it missed nothing about them), and whether the server now
    /// waits for this session on every change (its record of holds is full)
    Held { seq: u64, everything: bool },
}

/// A decoded reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyMsg {
    /// the server's volume-config epoch when it answered
    pub epoch: u64,
    pub result: Result<Reply, FsError>,
}

const ERR: u8 = 0;

pub fn encode_reply(epoch: u64, result: &Result<Reply, FsError>) -> Message {
    let mut w = BytesMut::with_capacity(64);
    w.put_u64_le(epoch);
    let mut bulk = Bytes::new();
    match result {
        Err(e) => {
            w.put_u8(ERR);
            e.0.enc(&mut w);
        }
        Ok(r) => match r {
            Reply::Unit => w.put_u8(1),
            Reply::Attr(a) => {
                w.put_u8(2);
                a.enc(&mut w)
            }
            Reply::Target(t) => {
                w.put_u8(3);
                t.enc(&mut w)
            }
            Reply::Removed(x) => {
                w.put_u8(4);
                x.enc(&mut w)
            }
            Reply::Renamed(x) => {
                w.put_u8(5);
                x.enc(&mut w)
            }
            Reply::Data(d) => {
                w.put_u8(6);
                bulk = d.clone();
            }
            Reply::Written(x) => {
                w.put_u8(7);
                x.written.enc(&mut w);
                x.attr.enc(&mut w);
                x.size_before.enc(&mut w);
                x.blocks_before.enc(&mut w);
            }
            Reply::Entries(x) => {
                w.reserve(x.len() * 64);
                w.put_u8(8);
                x.enc(&mut w)
            }
            Reply::StatFs(x) => {
                w.put_u8(9);
                x.enc(&mut w)
            }
            Reply::Names(x) => {
                w.put_u8(10);
                x.enc(&mut w)
            }
            Reply::Config { accepted, config, fence } => {
                w.put_u8(11);
                accepted.enc(&mut w);
                config.enc(&mut w);
                fence.enc(&mut w)
            }
            Reply::Callbacks { lease_ms, seq, fresh, items } => {
                w.put_u8(12);
                lease_ms.enc(&mut w);
                seq.enc(&mut w);
                fresh.enc(&mut w);
                items.enc(&mut w)
            }
            Reply::Lock(x) => {
                w.put_u8(13);
                x.enc(&mut w)
            }
            Reply::Attrs(x) => {
                w.reserve(x.len() * 64);
                w.put_u8(14);
                x.enc(&mut w)
            }
            Reply::DirNames(x) => {
                w.reserve(x.len() * 32);
                w.put_u8(15);
                x.enc(&mut w)
            }
            Reply::Held { seq, everything } => {
                w.put_u8(16);
                seq.enc(&mut w);
                everything.enc(&mut w)
            }
            Reply::Made(x) => {
                w.put_u8(17);
                x.enc(&mut w)
            }
        },
    }
    Message::new(w.freeze(), bulk)
}

pub fn decode_reply(msg: &Message) -> Result<ReplyMsg, WireError> {
    let mut r = R(&msg.head);
    let epoch = u64::dec(&mut r)?;
    let result = match u8::dec(&mut r)? {
        ERR => Err(FsError(i32::dec(&mut r)?)),
        1 => Ok(Reply::Unit),
        2 => Ok(Reply::Attr(Dec::dec(&mut r)?)),
        3 => Ok(Reply::Target(Dec::dec(&mut r)?)),
        4 => Ok(Reply::Removed(Dec::dec(&mut r)?)),
        5 => Ok(Reply::Renamed(Dec::dec(&mut r)?)),
        6 => Ok(Reply::Data(msg.bulk.clone())),
        7 => Ok(Reply::Written(WriteReply {
            written: Dec::dec(&mut r)?,
            attr: Dec::dec(&mut r)?,
            size_before: Dec::dec(&mut r)?,
            blocks_before: Dec::dec(&mut r)?,
        })),
        8 => Ok(Reply::Entries(Dec::dec(&mut r)?)),
        9 => Ok(Reply::StatFs(Dec::dec(&mut r)?)),
        10 => Ok(Reply::Names(Dec::dec(&mut r)?)),
        11 => Ok(Reply::Config { accepted: Dec::dec(&mut r)?, config: Dec::dec(&mut r)?, fence: Dec::dec(&mut r)? }),
        12 => Ok(Reply::Callbacks {
            lease_ms: Dec::dec(&mut r)?,
            seq: Dec::dec(&mut r)?,
            fresh: Dec::dec(&mut r)?,
            items: Dec::dec(&mut r)?,
        }),
        13 => Ok(Reply::Lock(Dec::dec(&mut r)?)),
        14 => Ok(Reply::Attrs(Dec::dec(&mut r)?)),
        15 => Ok(Reply::DirNames(Dec::dec(&mut r)?)),
        16 => Ok(Reply::Held { seq: Dec::dec(&mut r)?, everything: Dec::dec(&mut r)? }),
        17 => Ok(Reply::Made(Dec::dec(&mut r)?)),
        t => return Err(WireError::BadTag { what: "reply", tag: t }),
    };
    r.finish()?;
    Ok(ReplyMsg { epoch, result })
}

/// The reply shape of an operation's successful result: each result type of
/// the op table travels as exactly one [`Reply`] variant.
pub trait ReplyShape: Sized {
    fn into_reply(self) -> Reply;
    /// The result, or the reply back when it has another shape (only to be
    /// logged, so its size does not matter).
    #[allow(clippy::result_large_err)]
    fn from_reply(r: Reply) -> Result<Self, Reply>;
}

macro_rules! shapes {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl ReplyShape for $t {
            fn into_reply(self) -> Reply {
                Reply::$variant(self)
            }
            #[allow(clippy::result_large_err)]
            fn from_reply(r: Reply) -> Result<Self, Reply> {
                match r {
                    Reply::$variant(x) => Ok(x),
                    other => Err(other),
                }
            }
        }
    )*};
}

shapes!(
    Attr => Attr,
    Made => Made,
    String => Target,
    Removed => Removed,
    Renamed => Renamed,
    Data => Data,
    WriteReply => Written,
    Vec<DirEntry> => Entries,
    StatFs => StatFs,
    Vec<String> => Names,
    Lock => Lock,
    Vec<Option<Attr>> => Attrs,
    Vec<DirName> => DirNames,
);

impl ReplyShape for () {
    fn into_reply(self) -> Reply {
        Reply::Unit
    }
    #[allow(clippy::result_large_err)]
    fn from_reply(r: Reply) -> Result<Self, Reply> {
        match r {
            Reply::Unit => Ok(()),
            other => Err(other),
        }
    }
}
