//! Value payloads (stat, directory entry, block), and the CRC framing of
//! volumes run `--insecure` (a bank with a key frames values with a MAC
//! instead: see `codec.rs`, which every bank user goes through).
//!
//! ```text
//! "IM" | version u8 | kind u8 | crc32(key) u32 | payload length u32 | crc32(payload) u32 | payload
//! ```
//!
//! The header names the kind and the key the value was written for, and the
//! payload carries its length and checksum, so a truncated, corrupted or
//! foreign value (another program's, or one stored under the wrong key) is
//! recognised and treated as a miss — never returned to an application.

use bytes::{BufMut, Bytes, BytesMut};
use xlator::{Attr, FileId, FileKind, Timestamp};

const MAGIC: &[u8; 2] = b"IM";
/// the CRC framing's version byte (keyed framings use others: `codec.rs`)
pub const VERSION: u8 = 1;
pub const HEADER: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Stat = b'S',
    Dentry = b'D',
    Block = b'B',
    /// a claim placed by a populating gateway; never a hit
    Placeholder = b'P',
}

/// The CRC framing (insecure banks; use [`crate::Codec::encode`]).
pub fn encode(kind: Kind, key: &str, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER + payload.len());
    b.put_slice(MAGIC);
    b.put_u8(VERSION);
    b.put_u8(kind as u8);
    b.put_u32_le(crc32fast::hash(key.as_bytes()));
    b.put_u32_le(payload.len() as u32);
    b.put_u32_le(crc32fast::hash(payload));
    b.put_slice(payload);
    b.freeze()
}

/// The payload, if `v` is an intact value of `kind` written for `key`.
pub fn decode(kind: Kind, key: &str, v: &Bytes) -> Option<Bytes> {
    if v.len() < HEADER || &v[..2] != MAGIC || v[2] != VERSION || v[3] != kind as u8 {
        return None;
    }
    let u32at = |i: usize| u32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]]);
    if u32at(4) != crc32fast::hash(key.as_bytes()) || u32at(8) as usize != v.len() - HEADER {
        return None;
    }
    let payload = v.slice(HEADER..);
    (u32at(12) == crc32fast::hash(&payload)).then_some(payload)
}

fn kind_tag(k: FileKind) -> u8 {
    match k {
        FileKind::File => 0,
        FileKind::Dir => 1,
        FileKind::Symlink => 2,
        FileKind::Fifo => 3,
        FileKind::Socket => 4,
        FileKind::CharDev => 5,
        FileKind::BlockDev => 6,
    }
}

fn tag_kind(t: u8) -> Option<FileKind> {
    Some(match t {
        0 => FileKind::File,
        1 => FileKind::Dir,
        2 => FileKind::Symlink,
        3 => FileKind::Fifo,
        4 => FileKind::Socket,
        5 => FileKind::CharDev,
        6 => FileKind::BlockDev,
        _ => return None,
    })
}

pub fn attr_payload(a: &Attr) -> Vec<u8> {
    let mut b = Vec::with_capacity(96);
    b.put_u128_le(a.fid.0);
    b.put_u8(kind_tag(a.kind));
    b.put_u64_le(a.size);
    b.put_u64_le(a.blocks);
    for x in [a.perm, a.nlink, a.uid, a.gid, a.rdev] {
        b.put_u32_le(x);
    }
    for t in [a.atime, a.mtime, a.ctime] {
        b.put_i64_le(t.secs);
        b.put_u32_le(t.nsecs);
    }
    b
}

pub fn parse_attr(p: &[u8]) -> Option<Attr> {
    if p.len() != 16 + 1 + 16 + 20 + 36 {
        return None;
    }
    let u32at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().unwrap());
    let u64at = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap());
    let ts = |i: usize| Timestamp { secs: u64at(i) as i64, nsecs: u32at(i + 8) };
    Some(Attr {
        fid: FileId(u128::from_le_bytes(p[0..16].try_into().unwrap())),
        kind: tag_kind(p[16])?,
        size: u64at(17),
        blocks: u64at(25),
        perm: u32at(33),
        nlink: u32at(37),
        uid: u32at(41),
        gid: u32at(45),
        rdev: u32at(49),
        atime: ts(53),
        mtime: ts(65),
        ctime: ts(77),
    })
}

/// A directory entry: the child's id and kind, and the full name (the key
/// only carries a hash of it, so the name is checked on every hit).
pub fn dentry_payload(fid: FileId, kind: FileKind, name: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(17 + name.len());
    b.put_u128_le(fid.0);
    b.put_u8(kind_tag(kind));
    b.put_slice(name.as_bytes());
    b
}

pub fn parse_dentry(p: &[u8], name: &str) -> Option<(FileId, FileKind)> {
    if p.len() < 17 || &p[17..] != name.as_bytes() {
        return None;
    }
    Some((FileId(u128::from_le_bytes(p[0..16].try_into().unwrap())), tag_kind(p[16])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> Attr {
        Attr {
            fid: FileId(0xdead_beef_0000_0000_0000_0000_1234_5678),
            kind: FileKind::File,
            size: 1 << 40,
            blocks: 9,
            perm: 0o4755,
            nlink: 2,
            uid: 1000,
            gid: 100,
            rdev: 0,
            atime: Timestamp { secs: -5, nsecs: 999_999_999 },
            mtime: Timestamp { secs: 1_700_000_000, nsecs: 1 },
            ctime: Timestamp { secs: 1_700_000_001, nsecs: 2 },
        }
    }

    #[test]
    fn attr_round_trip() {
        let v = encode(Kind::Stat, "k", &attr_payload(&attr()));
        assert_eq!(parse_attr(&decode(Kind::Stat, "k", &v).unwrap()), Some(attr()));
    }

    #[test]
    fn corrupt_foreign_or_misplaced_values_are_misses() {
        let v = encode(Kind::Block, "k1", b"hello");
        assert_eq!(decode(Kind::Block, "k1", &v).as_deref(), Some(&b"hello"[..]));
        assert!(decode(Kind::Block, "k2", &v).is_none(), "stored under another key");
        assert!(decode(Kind::Stat, "k1", &v).is_none(), "another kind");
        for i in 0..v.len() {
            let mut bad = v.to_vec();
            bad[i] ^= 0x40;
            assert!(decode(Kind::Block, "k1", &Bytes::from(bad)).is_none(), "flip at {i}");
        }
        assert!(decode(Kind::Block, "k1", &v.slice(..v.len() - 1)).is_none(), "truncated");
        assert!(decode(Kind::Block, "k1", &Bytes::from_static(b"some other program's value")).is_none());
    }

    #[test]
    fn dentry_checks_the_full_name() {
        let p = dentry_payload(FileId(5), FileKind::Dir, "name");
        assert_eq!(parse_dentry(&p, "name"), Some((FileId(5), FileKind::Dir)));
        assert_eq!(parse_dentry(&p, "other"), None);
    }
}
