//! Every file type through the real FUSE mount (issue 11 part 4), with two
//! storage servers and two gateways: fifos, sockets and device nodes made
//! through one gateway stat, through either, as the same node made with the
//! same syscall in a local directory does (type, mode, rdev); `open` of a
//! socket is ENXIO at once; fifos and sockets are the gateway kernel's own
//! (a fifo or a bound socket connects users of one gateway, not of two);
//! `trusted.*` and `security.*` xattrs set through one gateway read back
//! through the other, while IMCa's own id attributes stay invisible and
//! unsettable; `O_TMPFILE` is a clear EOPNOTSUPP.

mod common;

use common::*;
use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// How long an `open` may take before it counts as blocked (generous: the
/// machine is busy; a blocked open never returns at all).
const OPEN_DEADLINE: Duration = Duration::from_secs(30);

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn mknod(p: &Path, mode: u32, dev: libc::dev_t) -> io::Result<()> {
    check(unsafe { libc::mknod(c(p).as_ptr(), mode, dev) })
}

/// What must be equal between the mount and the local directory.
fn node(p: &Path) -> (u32, u64, u64, u64, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
    (m.mode(), m.rdev(), m.nlink(), m.size(), m.uid(), m.gid())
}

fn setx(p: &Path, name: &str, v: &[u8]) -> io::Result<()> {
    let n = CString::new(name).unwrap();
    check(unsafe { libc::lsetxattr(c(p).as_ptr(), n.as_ptr(), v.as_ptr().cast(), v.len(), 0) })
}

fn getx(p: &Path, name: &str) -> io::Result<Vec<u8>> {
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::lgetxattr(c(p).as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn removex(p: &Path, name: &str) -> io::Result<()> {
    let n = CString::new(name).unwrap();
    check(unsafe { libc::lremovexattr(c(p).as_ptr(), n.as_ptr()) })
}

fn listx(p: &Path) -> Vec<String> {
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::llistxattr(c(p).as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(r >= 0, "listxattr {}: {}", p.display(), io::Error::last_os_error());
    let mut names: Vec<String> =
        buf[..r as usize].split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    names.sort();
    names
}

/// `open` on another thread: its result, or a failure if it blocks.
fn open_within(p: &Path, opts: OpenOptions) -> io::Result<fs::File> {
    let (tx, rx) = mpsc::channel();
    let p = p.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(opts.open(&p));
    });
    rx.recv_timeout(OPEN_DEADLINE).unwrap_or_else(|_| panic!("open blocked for {OPEN_DEADLINE:?}"))
}

fn read_opts(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).custom_flags(flags);
    o
}

fn write_opts(flags: i32) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true).custom_flags(flags);
    o
}

#[test]
fn devices_fifos_and_sockets_stat_as_on_a_local_disk() {
    special_nodes_as_on_a_local_disk(Cache::None);
}

/// The same through the cache bank (kinds and rdev live in cached attrs
/// and dentries too).
#[test]
fn devices_fifos_and_sockets_stat_as_on_a_local_disk_with_cache_nodes() {
    special_nodes_as_on_a_local_disk(Cache::Imca(2));
}

fn special_nodes_as_on_a_local_disk(cache: Cache) {
    let c = ClusterSpec::new().storage(2).cache(cache).gateways(2).storage_arg("--allow-devices").start();
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));
    let local = tempfile::tempdir().unwrap();
    let l = |p: &str| local.path().join(p);

    let nodes = [
        ("null", libc::S_IFCHR | 0o666, libc::makedev(1, 3)),
        ("loop", libc::S_IFBLK | 0o660, libc::makedev(7, 200)),
        // a large minor: 20 bits survive FUSE's 32-bit rdev
        ("big", libc::S_IFCHR | 0o600, libc::makedev(250, 70_000)),
        ("fifo", libc::S_IFIFO | 0o640, 0),
        ("sock", libc::S_IFSOCK | 0o755, 0),
    ];
    for (name, mode, dev) in nodes {
        mknod(&l(name), mode, dev).unwrap();
        mknod(&a(name), mode, dev).unwrap_or_else(|e| panic!("mknod {name} through the mount: {e}"));
        let want = node(&l(name));
        assert_eq!(node(&a(name)), want, "{name} through the gateway that made it");
        assert_eq!(node(&b(name)), want, "{name} through the other gateway");
        assert_eq!(node(&b(name)), want, "{name} again (from the bank, if any)");
        assert_eq!(node(&c.export(0).join(name)).0, want.0, "{name} on storage server 0");
    }
    // readdir tells the kinds too (ls, find -type).
    let mut kinds: Vec<(String, bool, bool, bool)> = fs::read_dir(c.path_at(1, ""))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            (e.file_name().to_string_lossy().into_owned(), t.is_char_device(), t.is_block_device(), t.is_socket())
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("big".into(), true, false, false),
            ("fifo".into(), false, false, false),
            ("loop".into(), false, true, false),
            ("null".into(), true, false, false),
            ("sock".into(), false, false, true),
        ]
    );

    // The gateway mounts `nodev`, like any FUSE mount: device nodes are
    // listed and stat'ed, never opened through it.
    assert_errno(open_within(&a("null"), read_opts(0)), libc::EACCES);

    // A socket cannot be opened, at once, on either gateway (as locally).
    assert_errno(open_within(&l("sock"), read_opts(0)), libc::ENXIO);
    for g in [a("sock"), b("sock")] {
        assert_errno(open_within(&g, read_opts(0)), libc::ENXIO);
    }

    // Removing them works as for any name.
    for (name, ..) in nodes {
        fs::remove_file(b(name)).unwrap();
        assert_errno(fs::symlink_metadata(a(name)), libc::ENOENT);
    }
}

#[test]
fn devices_are_refused_unless_the_export_allows_them() {
    let c = ClusterSpec::new().storage(2).gateways(1).start();
    for (name, mode) in [("null", libc::S_IFCHR), ("disk", libc::S_IFBLK)] {
        assert_errno(mknod(&c.path(name), mode | 0o666, libc::makedev(1, 3)), libc::EPERM);
        for s in 0..2 {
            assert!(fs::symlink_metadata(c.export(s).join(name)).is_err(), "{name} reached server {s}");
        }
    }
    // fifos and sockets are no danger: always allowed
    mknod(&c.path("fifo"), libc::S_IFIFO | 0o600, 0).unwrap();
    mknod(&c.path("sock"), libc::S_IFSOCK | 0o600, 0).unwrap();
}

#[test]
fn sockets_and_fifos_are_the_gateway_kernels_own() {
    let c = ClusterSpec::new().storage(2).gateways(2).start();
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));

    // bind() makes the node (a mknod through FUSE); connect() finds the
    // listening socket by inode in the kernel that bound it, so it works
    // through that gateway's mount...
    let listener = UnixListener::bind(a("sock")).expect("bind through the mount");
    assert!(fs::symlink_metadata(b("sock")).unwrap().file_type().is_socket());
    let mut client = UnixStream::connect(a("sock")).expect("connect through the same gateway");
    let (mut served, _) = listener.accept().unwrap();
    client.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    served.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
    // ...and is refused through another gateway, whose kernel has no
    // socket behind its inode (as on NFS or any network file system).
    assert_errno(UnixStream::connect(b("sock")), libc::ECONNREFUSED);
    assert_errno(open_within(&b("sock"), read_opts(0)), libc::ENXIO);

    // A fifo is a pipe in the opening kernel: reader and writer on one
    // gateway meet, as on a local disk...
    mknod(&a("fifo"), libc::S_IFIFO | 0o600, 0).unwrap();
    let mut reader = open_within(&a("fifo"), read_opts(libc::O_NONBLOCK)).unwrap();
    let mut writer = open_within(&a("fifo"), write_opts(0)).unwrap();
    writer.write_all(b"through the fifo").unwrap();
    drop(writer);
    let mut s = String::new();
    reader.read_to_string(&mut s).unwrap();
    assert_eq!(s, "through the fifo");
    drop(reader);
    // ...while a reader on the other gateway is not one this writer can
    // meet: with O_NONBLOCK and no reader in its own kernel, ENXIO.
    let _far_reader = open_within(&b("fifo"), read_opts(libc::O_NONBLOCK)).unwrap();
    assert_errno(open_within(&a("fifo"), write_opts(libc::O_NONBLOCK)), libc::ENXIO);
}

#[test]
fn trusted_and_security_xattrs_cross_gateways_imca_ids_never_do() {
    let c = ClusterSpec::new().storage(2).gateways(2).start();
    let (a, b) = (|p: &str| c.path_at(0, p), |p: &str| c.path_at(1, p));
    fs::write(a("file"), b"x").unwrap();
    fs::create_dir(a("dir")).unwrap();
    mknod(&a("fifo"), libc::S_IFIFO | 0o644, 0).unwrap();
    std::os::unix::fs::symlink("file", a("link")).unwrap();

    for name in ["file", "dir", "fifo", "link"] {
        setx(&a(name), "trusted.t", b"trusted value").unwrap_or_else(|e| panic!("trusted.* on {name}: {e}"));
        setx(&a(name), "security.s", b"security value").unwrap_or_else(|e| panic!("security.* on {name}: {e}"));
        assert_eq!(getx(&b(name), "trusted.t").unwrap(), b"trusted value", "{name} from the other gateway");
        assert_eq!(getx(&b(name), "security.s").unwrap(), b"security value", "{name}");
        assert_eq!(listx(&b(name)), ["security.s", "trusted.t"], "{name}: IMCa's ids are not listed");
        // IMCa's own: absent to read, refused to set or remove, from
        // either namespace it uses.
        for own in ["user.imca.fid", "trusted.imca.fid"] {
            assert_errno(getx(&b(name), own), libc::ENODATA);
            assert_errno(setx(&a(name), own, b"00000000000000000000000000000001"), libc::EPERM);
            assert_errno(removex(&b(name), own), libc::EPERM);
        }
        removex(&b(name), "trusted.t").unwrap();
        assert_errno(getx(&a(name), "trusted.t"), libc::ENODATA);
    }
    // The ids are there on the servers, unchanged, just not for clients.
    let id_of = |p: &Path, x: &str| String::from_utf8(getx(p, x).unwrap()).unwrap();
    for s in 0..2 {
        let e = c.export(s);
        assert_eq!(id_of(&e.join("fifo"), "trusted.imca.fid").len(), 32, "server {s}");
        assert_eq!(id_of(&e.join("file"), "user.imca.fid").len(), 32, "server {s}");
    }
    assert_eq!(fs::read(b("file")).unwrap(), b"x", "the file still answers by its id");

    // File capabilities are set-id power: refused by a default export.
    let mut caps = 0x0200_0000u32.to_le_bytes().to_vec();
    caps.extend_from_slice(&[0u8; 16]);
    assert_errno(setx(&a("file"), "security.capability", &caps), libc::EPERM);
    // POSIX ACLs are not offered.
    assert_errno(setx(&a("file"), "system.posix_acl_access", b"\x02\0\0\0"), libc::EOPNOTSUPP);
}

#[test]
fn o_tmpfile_is_a_clear_eopnotsupp() {
    let c = ClusterSpec::new().storage(2).gateways(1).start();
    let r = OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).mode(0o600).open(c.path(""));
    assert_errno(r, libc::EOPNOTSUPP);
    assert_eq!(fs::read_dir(c.path("")).unwrap().count(), 0, "nothing was left behind");
}

/// Every `isatty` (each Python `open`, for one) sends the file system an
/// ioctl: answered ENOTTY as on a local disk, and never logged as a
/// request the gateway lacks.
#[test]
fn ioctls_are_enotty_as_on_a_local_disk_and_not_logged() {
    let c = ClusterSpec::new().storage(2).gateways(1).start();
    fs::write(c.path("f"), b"x").unwrap();
    let f = fs::File::open(c.path("f")).unwrap();
    let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
    for _ in 0..3 {
        // SAFETY: a termios for TCGETS to fill, on an open fd.
        let r = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::TCGETS, t.as_mut_ptr()) };
        assert_eq!((r, io::Error::last_os_error().raw_os_error()), (-1, Some(libc::ENOTTY)));
    }
    let log = c.gateways[0].daemon.log_tail(10_000);
    assert!(!log.contains("Not Implemented"), "the gateway logged the ioctls:\n{log}");
}
