//! Encoding primitives and the encodings of the shared xlator types.

use crate::WireError;
use bytes::{BufMut, Bytes, BytesMut};
use volume::{CacheConfig, Placement};
use xlator::*;

pub(crate) type Res<T> = Result<T, WireError>;

/// A cursor over a head being decoded.
pub(crate) struct R<'a>(pub &'a [u8]);

impl<'a> R<'a> {
    pub fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.0.len() < n {
            return Err(WireError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    pub fn finish(&self) -> Res<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing(self.0.len()))
        }
    }

    /// A length prefix, checked against what is left so that a corrupt
    /// length cannot make us allocate gigabytes.
    pub fn len(&mut self, min_item: usize) -> Res<usize> {
        let n = u32::dec(self)? as usize;
        if n.saturating_mul(min_item.max(1)) > self.0.len() {
            return Err(WireError::BadLength(n as u64));
        }
        Ok(n)
    }
}

pub(crate) trait Enc {
    fn enc(&self, w: &mut BytesMut);
}

pub(crate) trait Dec: Sized {
    fn dec(r: &mut R) -> Res<Self>;
}

/// A request field: encoded in the head, except `Data`, which is the
/// message's bulk (at most one per message, never copied).
pub(crate) trait Field: Sized {
    fn put(&self, w: &mut BytesMut, bulk: &mut Bytes);
    fn take(r: &mut R, bulk: &Bytes) -> Res<Self>;
}

impl<T: Enc + Dec> Field for T {
    fn put(&self, w: &mut BytesMut, _bulk: &mut Bytes) {
        self.enc(w)
    }
    fn take(r: &mut R, _bulk: &Bytes) -> Res<Self> {
        T::dec(r)
    }
}

impl Field for Bytes {
    fn put(&self, _w: &mut BytesMut, bulk: &mut Bytes) {
        *bulk = self.clone();
    }
    fn take(_r: &mut R, bulk: &Bytes) -> Res<Self> {
        Ok(bulk.clone())
    }
}

macro_rules! int {
    ($t:ty, $put:ident) => {
        impl Enc for $t {
            fn enc(&self, w: &mut BytesMut) {
                w.$put(*self);
            }
        }
        impl Dec for $t {
            fn dec(r: &mut R) -> Res<Self> {
                const N: usize = std::mem::size_of::<$t>();
                let b = r.take(N)?;
                Ok(<$t>::from_le_bytes(b.try_into().unwrap()))
            }
        }
    };
}

int!(u8, put_u8);
int!(u32, put_u32_le);
int!(i32, put_i32_le);
int!(u64, put_u64_le);
int!(i64, put_i64_le);
int!(u128, put_u128_le);

impl Enc for bool {
    fn enc(&self, w: &mut BytesMut) {
        w.put_u8(*self as u8);
    }
}
impl Dec for bool {
    fn dec(r: &mut R) -> Res<Self> {
        match u8::dec(r)? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(WireError::BadTag { what: "bool", tag: t }),
        }
    }
}

impl Enc for str {
    fn enc(&self, w: &mut BytesMut) {
        w.put_u32_le(self.len() as u32);
        w.put_slice(self.as_bytes());
    }
}
impl Enc for String {
    fn enc(&self, w: &mut BytesMut) {
        self.as_str().enc(w)
    }
}
impl Dec for String {
    fn dec(r: &mut R) -> Res<Self> {
        let n = r.len(1)?;
        let b = r.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| WireError::BadUtf8)
    }
}

impl<T: Enc> Enc for Option<T> {
    fn enc(&self, w: &mut BytesMut) {
        match self {
            None => w.put_u8(0),
            Some(v) => {
                w.put_u8(1);
                v.enc(w)
            }
        }
    }
}
impl<T: Dec> Dec for Option<T> {
    fn dec(r: &mut R) -> Res<Self> {
        match u8::dec(r)? {
            0 => Ok(None),
            1 => Ok(Some(T::dec(r)?)),
            t => Err(WireError::BadTag { what: "option", tag: t }),
        }
    }
}

impl<T: Enc> Enc for Vec<T> {
    fn enc(&self, w: &mut BytesMut) {
        w.put_u32_le(self.len() as u32);
        for v in self {
            v.enc(w);
        }
    }
}
impl<T: Dec> Dec for Vec<T> {
    fn dec(r: &mut R) -> Res<Self> {
        let n = r.len(1)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::dec(r)?);
        }
        Ok(v)
    }
}

/// Fields encoded in declaration order.
macro_rules! record {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Enc for $t {
            fn enc(&self, w: &mut BytesMut) {
                $( self.$f.enc(w); )*
            }
        }
        impl Dec for $t {
            fn dec(r: &mut R) -> Res<Self> {
                Ok($t { $( $f: Dec::dec(r)? ),* })
            }
        }
    };
}

impl Enc for FileId {
    fn enc(&self, w: &mut BytesMut) {
        self.0.enc(w)
    }
}
impl Dec for FileId {
    fn dec(r: &mut R) -> Res<Self> {
        Ok(FileId(u128::dec(r)?))
    }
}

record!(Loc { path, fid });
record!(Timestamp { secs, nsecs });
record!(Attr { fid, kind, size, blocks, perm, nlink, uid, gid, rdev, atime, mtime, ctime });
record!(SetAttr { perm, uid, gid, size, atime, mtime });
record!(Owner { uid, gid });
record!(NewFile { name, fid, perm, owner, exclusive });
record!(DirEntry { name, kind, fid, next, attr });
record!(DirName { name, next });
record!(StatFs { blocks, bfree, bavail, files, ffree, bsize, namelen, frsize });
record!(RenameFlags { noreplace, exchange });
record!(XattrFlags { create, replace });
record!(FallocMode { op, keep_size });
record!(Extent { offset, len });
record!(Made { attr, dir });
record!(Removed { fid, remaining, dir });
record!(Renamed { moved, replaced, dir, newdir, moved_attr });
record!(Lock { kind, typ, start, end, owner, pid });
record!(CopySpan { src, dst, len });
record!(CacheConfig { epoch, volume, nodes, fenced, block_size, placement, timeout_ms, lease_ms });

/// Enums with only unit variants, as one tag byte.
macro_rules! unit_enum {
    ($t:ident, $what:literal { $($v:ident = $n:literal),* $(,)? }) => {
        impl Enc for $t {
            fn enc(&self, w: &mut BytesMut) {
                w.put_u8(match self { $( $t::$v => $n ),* });
            }
        }
        impl Dec for $t {
            fn dec(r: &mut R) -> Res<Self> {
                match u8::dec(r)? {
                    $( $n => Ok($t::$v), )*
                    t => Err(WireError::BadTag { what: $what, tag: t }),
                }
            }
        }
    };
}

// Tag 3 was "other special file" before the special kinds were told
// apart; it reads as a fifo, which is what such a node showed as then.
unit_enum!(FileKind, "file kind" { File = 0, Dir = 1, Symlink = 2, Fifo = 3, Socket = 4, CharDev = 5, BlockDev = 6 });
unit_enum!(LockType, "lock type" { Read = 0, Write = 1, Unlock = 2 });
unit_enum!(LockKind, "lock kind" { Posix = 0, Flock = 1, Append = 2 });
unit_enum!(Placement, "placement" { Crc32 = 0, Modulo = 1, Consistent = 2 });
unit_enum!(FallocOp, "fallocate op" { Allocate = 0, PunchHole = 1, ZeroRange = 2 });

impl Enc for TimeSet {
    fn enc(&self, w: &mut BytesMut) {
        match self {
            TimeSet::Now => w.put_u8(0),
            TimeSet::At(t) => {
                w.put_u8(1);
                t.enc(w)
            }
        }
    }
}
impl Dec for TimeSet {
    fn dec(r: &mut R) -> Res<Self> {
        match u8::dec(r)? {
            0 => Ok(TimeSet::Now),
            1 => Ok(TimeSet::At(Timestamp::dec(r)?)),
            t => Err(WireError::BadTag { what: "time", tag: t }),
        }
    }
}
