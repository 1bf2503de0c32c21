//! Requests: one variant per translator operation plus the volume-config
//! messages. A single table below defines each variant's opcode, metric name,
//! head fields (in order) and, where it has one, the field carried as bulk.

use crate::codec::{Dec, Enc, R};
use crate::WireError;
use bytes::{BufMut, Bytes, BytesMut};
use transport::Message;
use xlator::volume::CacheConfig;
use xlator::*;

macro_rules! requests {
    ($( $v:ident = $code:literal $name:literal { $($f:ident : $t:ty),* $(,)? } $(bulk $b:ident)? ;)*) => {
        /// One storage RPC request.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Request {
            $( $v { $($f: $t,)* $($b: Bytes,)? }, )*
        }

        /// The operation of a request, for metrics and logs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Op { $($v,)* }

        impl Op {
            pub const ALL: &'static [Op] = &[$(Op::$v,)*];

            /// Lower-case name, used as the `op` metric label.
            pub fn name(self) -> &'static str {
                match self { $(Op::$v => $name,)* }
            }
        }

        impl Request {
            pub fn op(&self) -> Op {
                match self { $(Request::$v { .. } => Op::$v,)* }
            }

            /// Encode into a message; a write's data (or an xattr value)
            /// becomes the bulk without being copied.
            pub fn encode(&self) -> Message {
                let mut w = BytesMut::with_capacity(64);
                #[allow(unused_mut)]
                let mut bulk = Bytes::new();
                match self {
                    $(
                        #[allow(unused_variables)]
                        Request::$v { $($f,)* $($b,)? } => {
                            w.put_u8($code);
                            $( $f.enc(&mut w); )*
                            $( bulk = $b.clone(); )?
                        }
                    )*
                }
                Message::new(w.freeze(), bulk)
            }

            pub fn decode(msg: &Message) -> Result<Request, WireError> {
                let mut r = R(&msg.head);
                let req = match u8::dec(&mut r)? {
                    $( $code => Request::$v { $($f: Dec::dec(&mut r)?,)* $($b: { let _ = stringify!($b); msg.bulk.clone() },)? }, )*
                    t => return Err(WireError::BadTag { what: "opcode", tag: t }),
                };
                r.finish()?;
                Ok(req)
            }
        }
    };
}

requests! {
    Lookup = 1 "lookup" { parent: Loc, name: String };
    Getattr = 2 "getattr" { loc: Loc };
    Setattr = 3 "setattr" { loc: Loc, set: SetAttr };
    Readlink = 4 "readlink" { loc: Loc };
    Mknod = 5 "mknod" { parent: Loc, new: NewFile, mode: u32, rdev: u32 };
    Mkdir = 6 "mkdir" { parent: Loc, new: NewFile };
    Create = 7 "create" { parent: Loc, new: NewFile, flags: i32 };
    Symlink = 8 "symlink" { parent: Loc, new: NewFile, target: String };
    Link = 9 "link" { loc: Loc, newparent: Loc, newname: String };
    Unlink = 10 "unlink" { parent: Loc, name: String };
    Rmdir = 11 "rmdir" { parent: Loc, name: String };
    Rename = 12 "rename" { parent: Loc, name: String, newparent: Loc, newname: String, flags: RenameFlags };
    Open = 13 "open" { loc: Loc, flags: i32 };
    Release = 14 "release" { loc: Loc };
    Read = 15 "read" { loc: Loc, offset: u64, size: u32 };
    Write = 16 "write" { loc: Loc, offset: u64 } bulk data;
    Flush = 17 "flush" { loc: Loc };
    Fsync = 18 "fsync" { loc: Loc, datasync: bool };
    Readdir = 19 "readdir" { loc: Loc, cookie: u64, max: u32, plus: bool };
    Statfs = 20 "statfs" { loc: Loc };
    Setxattr = 21 "setxattr" { loc: Loc, name: String, flags: XattrFlags } bulk value;
    Getxattr = 22 "getxattr" { loc: Loc, name: String };
    Listxattr = 23 "listxattr" { loc: Loc };
    Removexattr = 24 "removexattr" { loc: Loc, name: String };
    GetVolumeConfig = 64 "get_volume_config" {};
    SetVolumeConfig = 65 "set_volume_config" { config: CacheConfig };
}
