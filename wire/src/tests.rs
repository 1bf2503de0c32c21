//! Unit tests and proptest round trips of the codec.

use crate::*;
use bytes::Bytes;
use proptest::prelude::*;
use transport::Message;
use volume::{CacheConfig, Placement};
use xlator::*;

fn fid() -> impl Strategy<Value = FileId> {
    any::<u128>().prop_map(FileId)
}
fn name() -> impl Strategy<Value = String> {
    "\\PC{0,40}"
}
fn loc() -> impl Strategy<Value = Loc> {
    (name(), proptest::option::of(fid())).prop_map(|(path, fid)| Loc { path, fid })
}
fn ts() -> impl Strategy<Value = Timestamp> {
    (any::<i64>(), any::<u32>()).prop_map(|(secs, nsecs)| Timestamp { secs, nsecs })
}
fn kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        Just(FileKind::File),
        Just(FileKind::Dir),
        Just(FileKind::Symlink),
        Just(FileKind::Fifo),
        Just(FileKind::Socket),
        Just(FileKind::CharDev),
        Just(FileKind::BlockDev),
    ]
}
fn attr() -> impl Strategy<Value = Attr> {
    (fid(), kind(), any::<[u64; 2]>(), any::<[u32; 5]>(), ts(), ts(), ts()).prop_map(|(fid, kind, a, b, at, mt, ct)| Attr {
        fid,
        kind,
        size: a[0],
        blocks: a[1],
        perm: b[0],
        nlink: b[1],
        uid: b[2],
        gid: b[3],
        rdev: b[4],
        atime: at,
        mtime: mt,
        ctime: ct,
    })
}
fn timeset() -> impl Strategy<Value = TimeSet> {
    prop_oneof![Just(TimeSet::Now), ts().prop_map(TimeSet::At)]
}
fn setattr() -> impl Strategy<Value = SetAttr> {
    use proptest::option::of;
    (of(any::<u32>()), of(any::<u32>()), of(any::<u32>()), of(any::<u64>()), of(timeset()), of(timeset()))
        .prop_map(|(perm, uid, gid, size, atime, mtime)| SetAttr { perm, uid, gid, size, atime, mtime })
}
fn newfile() -> impl Strategy<Value = NewFile> {
    (name(), fid(), any::<u32>(), any::<(u32, u32)>(), any::<bool>()).prop_map(|(name, fid, perm, (uid, gid), exclusive)| {
        NewFile { name, fid, perm, owner: Owner { uid, gid }, exclusive }
    })
}
fn bytes() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..300).prop_map(Bytes::from)
}
fn config() -> impl Strategy<Value = CacheConfig> {
    let names = || proptest::collection::vec(name(), 0..4);
    (any::<u64>(), name(), (names(), names()), any::<u32>(), 0u8..3, any::<u64>(), any::<u64>())
        .prop_map(|(epoch, volume, (nodes, fenced), block_size, p, timeout_ms, lease_ms)| CacheConfig {
            epoch,
            volume,
            nodes,
            fenced,
            block_size,
            placement: [Placement::Crc32, Placement::Modulo, Placement::Consistent][p as usize],
            timeout_ms,
            lease_ms,
        })
}

fn lock() -> impl Strategy<Value = Lock> {
    (0u8..3, 0u8..3, any::<(u64, u64, u64, u32)>()).prop_map(|(k, t, (start, end, owner, pid))| Lock {
        kind: [LockKind::Posix, LockKind::Flock, LockKind::Append][k as usize],
        typ: [LockType::Read, LockType::Write, LockType::Unlock][t as usize],
        start,
        end,
        owner,
        pid,
    })
}

fn falloc_mode() -> impl Strategy<Value = FallocMode> {
    (0u8..3, any::<bool>()).prop_map(|(o, keep_size)| FallocMode {
        op: [FallocOp::Allocate, FallocOp::PunchHole, FallocOp::ZeroRange][o as usize],
        keep_size,
    })
}

fn request() -> impl Strategy<Value = Request> {
    let rf = any::<(bool, bool)>().prop_map(|(noreplace, exchange)| RenameFlags { noreplace, exchange });
    let xf = any::<(bool, bool)>().prop_map(|(create, replace)| XattrFlags { create, replace });
    prop_oneof![
        (loc(), name()).prop_map(|(parent, name)| Request::Lookup { parent, name }),
        loc().prop_map(|loc| Request::Getattr { loc }),
        (loc(), setattr()).prop_map(|(loc, set)| Request::Setattr { loc, set }),
        loc().prop_map(|loc| Request::Readlink { loc }),
        (loc(), newfile(), any::<u32>(), any::<u32>())
            .prop_map(|(parent, new, mode, rdev)| Request::Mknod { parent, new, mode, rdev }),
        (loc(), newfile()).prop_map(|(parent, new)| Request::Mkdir { parent, new }),
        (loc(), newfile(), any::<i32>()).prop_map(|(parent, new, flags)| Request::Create { parent, new, flags }),
        (loc(), newfile(), name()).prop_map(|(parent, new, target)| Request::Symlink { parent, new, target }),
        (loc(), loc(), name()).prop_map(|(loc, newparent, newname)| Request::Link { loc, newparent, newname }),
        (loc(), name()).prop_map(|(parent, name)| Request::Unlink { parent, name }),
        (loc(), name()).prop_map(|(parent, name)| Request::Rmdir { parent, name }),
        (loc(), name(), loc(), name(), rf).prop_map(|(parent, name, newparent, newname, flags)| Request::Rename {
            parent,
            name,
            newparent,
            newname,
            flags
        }),
        (loc(), any::<i32>()).prop_map(|(loc, flags)| Request::Open { loc, flags }),
        loc().prop_map(|loc| Request::Release { loc }),
        (loc(), any::<u64>(), any::<u32>()).prop_map(|(loc, offset, size)| Request::Read { loc, offset, size }),
        (loc(), any::<u64>(), bytes()).prop_map(|(loc, offset, data)| Request::Write { loc, offset, data }),
        loc().prop_map(|loc| Request::Flush { loc }),
        (loc(), any::<bool>()).prop_map(|(loc, datasync)| Request::Fsync { loc, datasync }),
        (loc(), any::<u64>(), any::<u32>(), any::<bool>())
            .prop_map(|(loc, cookie, max, plus)| Request::Readdir { loc, cookie, max, plus }),
        loc().prop_map(|loc| Request::Statfs { loc }),
        (loc(), name(), xf, bytes()).prop_map(|(loc, name, flags, value)| Request::Setxattr { loc, name, flags, value }),
        (loc(), name()).prop_map(|(loc, name)| Request::Getxattr { loc, name }),
        loc().prop_map(|loc| Request::Listxattr { loc }),
        (loc(), name()).prop_map(|(loc, name)| Request::Removexattr { loc, name }),
        (loc(), lock()).prop_map(|(loc, lock)| Request::Getlk { loc, lock }),
        (loc(), lock(), any::<bool>()).prop_map(|(loc, lock, wait)| Request::Setlk { loc, lock, wait }),
        proptest::collection::vec(loc(), 0..8).prop_map(|locs| Request::Getattrs { locs }),
        (loc(), any::<u64>(), any::<u32>()).prop_map(|(loc, cookie, max)| Request::Names { loc, cookie, max }),
        (loc(), falloc_mode(), proptest::collection::vec(any::<(u64, u64)>(), 0..8)).prop_map(|(loc, mode, r)| {
            Request::Fallocate { loc, mode, ranges: r.into_iter().map(|(offset, len)| Extent { offset, len }).collect() }
        }),
        (loc(), loc(), proptest::collection::vec(any::<(u64, u64, u64)>(), 0..8)).prop_map(|(src, dst, r)| Request::CopyRange {
            src,
            dst,
            ranges: r.into_iter().map(|(src, dst, len)| CopySpan { src, dst, len }).collect()
        }),
        Just(Request::GetVolumeConfig {}),
        config().prop_map(|config| Request::SetVolumeConfig { config }),
        any::<(u64, u64)>().prop_map(|(session, acked)| Request::Poll { session, acked }),
        (any::<u64>(), proptest::collection::vec(any::<u64>(), 0..20)).prop_map(|(session, inos)| Request::Hold { session, inos }),
        (any::<u64>(), proptest::collection::vec(any::<u64>(), 0..20)).prop_map(|(session, inos)| Request::Unhold { session, inos }),
        (loc(), lock()).prop_map(|(loc, lock)| Request::Reclaim { loc, lock }),
        proptest::collection::vec(loc(), 0..8).prop_map(|locs| Request::Releases { locs }),
    ]
}

fn invalidation() -> impl Strategy<Value = Invalidation> {
    prop_oneof![
        (fid(), any::<i64>(), any::<i64>()).prop_map(|(fid, offset, len)| Invalidation::Inode { fid, offset, len }),
        (fid(), name()).prop_map(|(parent, name)| Invalidation::Entry { parent, name }),
        Just(Invalidation::All),
    ]
}

fn removed() -> impl Strategy<Value = Removed> {
    (fid(), proptest::option::of(attr()), proptest::option::of(attr())).prop_map(|(fid, remaining, dir)| Removed { fid, remaining, dir })
}

fn reply() -> impl Strategy<Value = Result<Reply, FsError>> {
    let entry = (name(), kind(), fid(), any::<u64>(), proptest::option::of(attr()))
        .prop_map(|(name, kind, fid, next, attr)| DirEntry { name, kind, fid, next, attr });
    let statfs = any::<([u64; 5], [u32; 3])>().prop_map(|(a, b)| StatFs {
        blocks: a[0],
        bfree: a[1],
        bavail: a[2],
        files: a[3],
        ffree: a[4],
        bsize: b[0],
        namelen: b[1],
        frsize: b[2],
    });
    prop_oneof![
        any::<i32>().prop_map(|e| Err(FsError(e))),
        Just(Ok(Reply::Unit)),
        attr().prop_map(|a| Ok(Reply::Attr(a))),
        name().prop_map(|t| Ok(Reply::Target(t))),
        removed().prop_map(|r| Ok(Reply::Removed(r))),
        (attr(), proptest::option::of(attr())).prop_map(|(attr, dir)| Ok(Reply::Made(Made { attr, dir }))),
        (fid(), proptest::option::of(removed()), proptest::option::of(attr()), proptest::option::of(attr()), proptest::option::of(attr()))
            .prop_map(|(moved, replaced, dir, newdir, moved_attr)| Ok(Reply::Renamed(Renamed { moved, replaced, dir, newdir, moved_attr }))),
        bytes().prop_map(|d| Ok(Reply::Data(d))),
        (any::<u32>(), proptest::option::of(attr()), proptest::option::of(any::<u64>()), proptest::option::of(any::<u64>()))
            .prop_map(|(written, attr, size_before, blocks_before)| Ok(Reply::Written(WriteReply { written, attr, size_before, blocks_before }))),
        proptest::collection::vec(entry, 0..20).prop_map(|e| Ok(Reply::Entries(e))),
        statfs.prop_map(|s| Ok(Reply::StatFs(s))),
        proptest::collection::vec(name(), 0..10).prop_map(|n| Ok(Reply::Names(n))),
        (any::<bool>(), config(), proptest::collection::vec(name(), 0..3))
            .prop_map(|(accepted, config, fence)| Ok(Reply::Config { accepted, config, fence })),
        (any::<(u32, u64, bool)>(), proptest::collection::vec(invalidation(), 0..10))
            .prop_map(|((lease_ms, seq, fresh), items)| Ok(Reply::Callbacks { lease_ms, seq, fresh, items })),
        lock().prop_map(|l| Ok(Reply::Lock(l))),
        proptest::collection::vec(proptest::option::of(attr()), 0..8).prop_map(|a| Ok(Reply::Attrs(a))),
        proptest::collection::vec((name(), any::<u64>()).prop_map(|(name, next)| DirName { name, next }), 0..8)
            .prop_map(|n| Ok(Reply::DirNames(n))),
        any::<(u64, bool)>().prop_map(|(seq, everything)| Ok(Reply::Held { seq, everything })),
    ]
}

proptest! {
    #[test]
    fn request_round_trips(req in request()) {
        let msg = req.encode();
        prop_assert_eq!(Request::decode(&msg).unwrap(), req);
    }

    #[test]
    fn requests_round_trip_in_a_session(req in request(), session in any::<u64>()) {
        let msg = req.encode_in_session(session);
        prop_assert_eq!(Request::decode_in_session(&msg).unwrap(), (session, req));
    }

    #[test]
    fn reply_round_trips(epoch in any::<u64>(), rep in reply()) {
        let msg = encode_reply(epoch, &rep);
        let back = decode_reply(&msg).unwrap();
        prop_assert_eq!(back.epoch, epoch);
        prop_assert_eq!(back.result, rep);
    }

    /// Any prefix or corruption of a valid head decodes to an error or some
    /// request, never a panic.
    #[test]
    fn truncated_or_corrupt_heads_never_panic(req in request(), cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>()) {
        let msg = req.encode();
        let n = cut.index(msg.head.len() + 1);
        let short = Message::new(msg.head.slice(..n), msg.bulk.clone());
        if n < msg.head.len() {
            prop_assert!(Request::decode(&short).is_err());
        }
        let mut h = msg.head.to_vec();
        if !h.is_empty() {
            let i = flip.0.index(h.len());
            h[i] ^= flip.1;
        }
        let _ = Request::decode(&Message::new(Bytes::from(h.clone()), Bytes::new()));
        let _ = decode_reply(&Message::new(Bytes::from(h), Bytes::new()));
    }

    #[test]
    fn garbage_never_panics(h in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Request::decode(&Message::new(Bytes::from(h.clone()), Bytes::new()));
        let _ = decode_reply(&Message::new(Bytes::from(h), Bytes::new()));
    }
}

#[test]
fn write_data_travels_as_bulk_without_copy() {
    let data = Bytes::from(vec![5u8; 1 << 20]);
    let req = Request::Write { loc: Loc::new("a/b", Some(FileId(9))), offset: 1 << 33, data: data.clone() };
    let msg = req.encode();
    assert!(msg.head.len() < 64, "head carries no data");
    assert_eq!(msg.bulk.as_ptr(), data.as_ptr(), "bulk is the caller's buffer");
    match Request::decode(&msg).unwrap() {
        Request::Write { data: d, offset, .. } => {
            assert_eq!(offset, 1 << 33);
            assert_eq!(d.as_ptr(), data.as_ptr());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn known_layouts_and_errors() {
    let m = encode_reply(7, &Err(FsError::ENOENT));
    let mut want = 7u64.to_le_bytes().to_vec();
    want.push(0);
    want.extend_from_slice(&libc_enoent().to_le_bytes());
    assert_eq!(&m.head[..], &want[..]);
    assert_eq!(Request::decode(&Message::new(Bytes::from_static(&[200]), Bytes::new())), Err(WireError::BadTag { what: "opcode", tag: 200 }));
    // A huge list length must not allocate; it is rejected.
    let mut h = vec![23u8];
    h.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    assert!(matches!(Request::decode(&Message::new(Bytes::from(h), Bytes::new())), Err(WireError::BadLength(_))));
    let mut h = Request::Getattr { loc: Loc::root() }.encode().head.to_vec();
    h.push(0);
    assert_eq!(Request::decode(&Message::new(Bytes::from(h), Bytes::new())), Err(WireError::Trailing(1)));
    for op in Op::all() {
        assert!(!op.name().is_empty());
    }
}

fn libc_enoent() -> i32 {
    FsError::ENOENT.0
}

/// The opcodes come from the op table; a deployed peer depends on them, so
/// they are spelled out here once more: moving one must fail this test.
#[test]
fn opcodes_never_move() {
    let names = [
        "lookup", "getattr", "setattr", "readlink", "mknod", "mkdir", "create", "symlink", "link", "unlink", "rmdir",
        "rename", "open", "release", "read", "write", "flush", "fsync", "readdir", "statfs", "setxattr", "getxattr",
        "listxattr", "removexattr", "getlk", "setlk", "getattrs", "names", "fallocate",
    ];
    // (the table lists them by class; the opcodes are what must not move)
    let mut table: Vec<(&str, u8)> = Fop::ALL.iter().map(|f| (f.name(), f.code())).collect();
    table.sort_by_key(|&(_, c)| c);
    let mut want: Vec<(&str, u8)> = names.iter().zip(1u8..).map(|(n, c)| (*n, c)).collect();
    want.push(("copy_range", 30));
    assert_eq!(table, want);
    assert_eq!(Request::Write { loc: Loc::root(), offset: 0, data: Bytes::new() }.encode().head[0], 16);
    assert_eq!(Request::GetVolumeConfig {}.encode().head[0], 64);
    assert_eq!(Request::SetVolumeConfig { config: Default::default() }.encode().head[0], 65);
    assert_eq!(Request::Poll { session: 1, acked: 0 }.encode().head[0], 66);
    assert_eq!(Request::Hold { session: 1, inos: vec![] }.encode().head[0], 68);
    assert_eq!(Request::Getattr { loc: Loc::root() }.encode_in_session(5).head[0], 67);
}

#[test]
fn session_envelopes_are_checked() {
    let inner = Request::Getattr { loc: Loc::root() };
    // No envelope: session 0; an envelope naming session 0, or nested, is refused.
    assert_eq!(Request::decode_in_session(&inner.encode()).unwrap(), (NO_SESSION, inner.clone()));
    let mut h = vec![67u8];
    h.extend_from_slice(&0u64.to_le_bytes());
    h.extend_from_slice(&inner.encode().head);
    assert!(Request::decode_in_session(&Message::new(Bytes::from(h), Bytes::new())).is_err());
    let mut h = vec![67u8];
    h.extend_from_slice(&3u64.to_le_bytes());
    h.extend_from_slice(&inner.encode_in_session(4).head);
    assert!(Request::decode_in_session(&Message::new(Bytes::from(h), Bytes::new())).is_err());
    // Truncated envelope.
    assert_eq!(Request::decode_in_session(&Message::new(Bytes::from_static(&[67, 1, 2]), Bytes::new())), Err(WireError::Truncated));
    // A write's bulk stays the bulk inside an envelope.
    let data = Bytes::from(vec![1u8; 4096]);
    let w = Request::Write { loc: Loc::root(), offset: 0, data: data.clone() }.encode_in_session(9);
    assert_eq!(w.bulk.as_ptr(), data.as_ptr());
}
