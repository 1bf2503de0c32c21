//! Every file operation through a real mount (2 storage servers, 1 gateway),
//! with the errno a local file system gives for each misuse.

mod common;

use common::*;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn rename2(a: &Path, b: &Path, flags: u32) -> std::io::Result<()> {
    let (a, b) = (cpath(a), cpath(b));
    // SAFETY: valid C strings.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), flags) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn xattr_set(p: &Path, name: &str, value: &[u8], flags: i32) -> std::io::Result<()> {
    let (p, n) = (cpath(p), CString::new(name).unwrap());
    // SAFETY: valid pointers and lengths.
    let r = unsafe { libc::setxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn xattr_get(p: &Path, name: &str) -> std::io::Result<Vec<u8>> {
    let (p, n) = (cpath(p), CString::new(name).unwrap());
    let mut buf = vec![0u8; 65536];
    // SAFETY: valid pointers and lengths.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn xattr_list(p: &Path) -> std::io::Result<Vec<String>> {
    let p = cpath(p);
    let mut buf = vec![0u8; 65536];
    // SAFETY: valid pointers and lengths.
    let r = unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    buf.truncate(r as usize);
    Ok(buf.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
}

fn xattr_remove(p: &Path, name: &str) -> std::io::Result<()> {
    let (p, n) = (cpath(p), CString::new(name).unwrap());
    // SAFETY: valid C strings.
    let r = unsafe { libc::removexattr(p.as_ptr(), n.as_ptr()) };
    if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn files_directories_and_their_errors() {
    let c = ClusterSpec::new().start();
    let m = c.mount();

    // create, write, read, stat
    fs::write(m.join("a.txt"), b"hello world").unwrap();
    assert_eq!(fs::read(m.join("a.txt")).unwrap(), b"hello world");
    let md = fs::metadata(m.join("a.txt")).unwrap();
    assert!(md.is_file());
    assert_eq!(md.len(), 11);
    fs::create_dir(m.join("d")).unwrap();
    fs::create_dir_all(m.join("d/e/f")).unwrap();
    fs::write(m.join("d/e/f/g"), b"deep").unwrap();
    assert_eq!(fs::read(m.join("d/e/f/g")).unwrap(), b"deep");
    assert!(fs::metadata(m.join("d/e")).unwrap().is_dir());
    assert_eq!(names(m), vec!["a.txt", "d"]);
    assert_eq!(names(&m.join("d/e/f")), vec!["g"]);

    // ENOENT
    assert_errno(File::open(m.join("missing")), libc::ENOENT);
    assert_errno(fs::metadata(m.join("missing")), libc::ENOENT);
    assert_errno(fs::metadata(m.join("missing/below")), libc::ENOENT);
    assert_errno(fs::remove_file(m.join("missing")), libc::ENOENT);
    assert_errno(fs::remove_dir(m.join("missing")), libc::ENOENT);
    assert_errno(fs::rename(m.join("missing"), m.join("x")), libc::ENOENT);
    assert_errno(fs::write(m.join("missing/x"), b""), libc::ENOENT);
    // EEXIST
    assert_errno(fs::create_dir(m.join("d")), libc::EEXIST);
    assert_errno(fs::create_dir(m.join("a.txt")), libc::EEXIST);
    assert_errno(OpenOptions::new().write(true).create_new(true).open(m.join("a.txt")), libc::EEXIST);
    assert_errno(fs::hard_link(m.join("a.txt"), m.join("d/e/f/g")), libc::EEXIST);
    assert_errno(std::os::unix::fs::symlink("t", m.join("a.txt")), libc::EEXIST);
    // ENOTDIR
    assert_errno(fs::create_dir(m.join("a.txt/sub")), libc::ENOTDIR);
    assert_errno(fs::read_dir(m.join("a.txt")), libc::ENOTDIR);
    assert_errno(fs::remove_dir(m.join("a.txt")), libc::ENOTDIR);
    assert_errno(fs::metadata(m.join("a.txt/x")), libc::ENOTDIR);
    // EISDIR
    assert_errno(OpenOptions::new().write(true).open(m.join("d")), libc::EISDIR);
    assert_errno(fs::remove_file(m.join("d")), libc::EISDIR);
    // ENOTEMPTY
    assert_errno(fs::remove_dir(m.join("d")), libc::ENOTEMPTY);
    // ENAMETOOLONG (255 bytes is the limit)
    let long = "n".repeat(256);
    assert_errno(fs::write(m.join(&long), b""), libc::ENAMETOOLONG);
    assert_errno(fs::create_dir(m.join(&long)), libc::ENAMETOOLONG);
    let longest = "n".repeat(255);
    fs::write(m.join(&longest), b"ok").unwrap();
    assert_eq!(fs::read(m.join(&longest)).unwrap(), b"ok");
    // A name that is not UTF-8 is refused clearly, not mangled.
    let bad = std::ffi::OsStr::from_bytes(b"bad-\xff-name");
    assert_errno(fs::write(m.join(bad), b""), libc::EILSEQ);

    // remove
    fs::remove_file(m.join("d/e/f/g")).unwrap();
    fs::remove_dir(m.join("d/e/f")).unwrap();
    assert_eq!(names(&m.join("d/e")), Vec::<String>::new());
    fs::remove_dir_all(m.join("d")).unwrap();
    fs::remove_file(m.join("a.txt")).unwrap();
    assert_errno(fs::metadata(m.join("a.txt")), libc::ENOENT);

    // what a removed file leaves: nothing on any server but the fid bookkeeping
    for i in 0..2 {
        assert!(!c.export(i).join("a.txt").exists(), "server {i} still has a.txt");
    }
    // files and directories exist on every server (namespace ops go everywhere)
    fs::create_dir(m.join("everywhere")).unwrap();
    for i in 0..2 {
        assert!(c.export(i).join("everywhere").is_dir(), "server {i} lacks the directory");
    }
}

#[test]
fn attributes_statfs_and_xattrs() {
    let c = ClusterSpec::new().start();
    let m = c.mount();
    let f = m.join("f");
    fs::write(&f, vec![7u8; 1000]).unwrap();

    fs::set_permissions(&f, fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(&f, Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(&f).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 5678));

    // utimens
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_500_000_000, 123_456_789);
    let file = File::options().write(true).open(&f).unwrap();
    file.set_times(fs::FileTimes::new().set_accessed(t).set_modified(t)).unwrap();
    drop(file);
    let md = fs::metadata(&f).unwrap();
    assert_eq!((md.mtime(), md.mtime_nsec()), (1_500_000_000, 123_456_789));
    assert_eq!(md.atime(), 1_500_000_000);

    // truncate: shrink, extend (zeros), to zero
    let file = File::options().write(true).open(&f).unwrap();
    file.set_len(10).unwrap();
    assert_eq!(fs::read(&f).unwrap(), vec![7u8; 10]);
    file.set_len(300_000).unwrap();
    let data = fs::read(&f).unwrap();
    assert_eq!(data.len(), 300_000);
    assert_eq!(&data[..10], &[7u8; 10]);
    assert!(data[10..].iter().all(|b| *b == 0));
    file.set_len(0).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().len(), 0);
    drop(file);
    // O_TRUNC on open
    fs::write(&f, b"abc").unwrap();
    fs::write(&f, b"x").unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"x");

    // statfs is the sum over servers: at least as large as one server's export
    let mut vol: libc::statvfs = unsafe { std::mem::zeroed() };
    let mut one: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    assert_eq!(unsafe { libc::statvfs(cpath(m).as_ptr(), &mut vol) }, 0);
    assert_eq!(unsafe { libc::statvfs(cpath(&c.export(0)).as_ptr(), &mut one) }, 0);
    let bytes = |s: &libc::statvfs| s.f_blocks as u128 * s.f_frsize as u128;
    assert!(bytes(&vol) >= 2 * bytes(&one) * 99 / 100, "volume {} vs one server {}", bytes(&vol), bytes(&one));
    assert!(vol.f_namemax >= 255);

    // xattrs (user.*)
    xattr_set(&f, "user.color", b"blue", 0).unwrap();
    assert_eq!(xattr_get(&f, "user.color").unwrap(), b"blue");
    assert_errno(xattr_set(&f, "user.color", b"red", libc::XATTR_CREATE), libc::EEXIST);
    assert_errno(xattr_set(&f, "user.size", b"1", libc::XATTR_REPLACE), libc::ENODATA);
    xattr_set(&f, "user.color", b"red", libc::XATTR_REPLACE).unwrap();
    assert_eq!(xattr_get(&f, "user.color").unwrap(), b"red");
    xattr_set(&f, "user.big", &vec![1u8; 4000], 0).unwrap();
    let mut listed = xattr_list(&f).unwrap();
    listed.sort();
    assert_eq!(listed, vec!["user.big", "user.color"], "internal xattrs must not leak");
    xattr_remove(&f, "user.color").unwrap();
    assert_errno(xattr_get(&f, "user.color"), libc::ENODATA);
    assert_errno(xattr_remove(&f, "user.color"), libc::ENODATA);
    fs::create_dir(m.join("dx")).unwrap();
    xattr_set(&m.join("dx"), "user.d", b"1", 0).unwrap();
    assert_eq!(xattr_get(&m.join("dx"), "user.d").unwrap(), b"1");
}

#[test]
fn renames_links_and_symlinks() {
    let c = ClusterSpec::new().start();
    let m = c.mount();
    fs::create_dir_all(m.join("a/sub")).unwrap();
    fs::create_dir(m.join("b")).unwrap();
    fs::write(m.join("a/f"), b"F").unwrap();
    fs::write(m.join("a/sub/deep"), b"D").unwrap();

    // same directory, across directories, over an existing file
    fs::rename(m.join("a/f"), m.join("a/g")).unwrap();
    assert_errno(fs::metadata(m.join("a/f")), libc::ENOENT);
    fs::rename(m.join("a/g"), m.join("b/g")).unwrap();
    fs::write(m.join("b/h"), b"old").unwrap();
    fs::rename(m.join("b/g"), m.join("b/h")).unwrap();
    assert_eq!(fs::read(m.join("b/h")).unwrap(), b"F");
    assert_eq!(names(&m.join("b")), vec!["h"]);

    // a directory with contents, and open files keep working across it
    let mut open = File::open(m.join("a/sub/deep")).unwrap();
    fs::rename(m.join("a/sub"), m.join("b/moved")).unwrap();
    assert_eq!(fs::read(m.join("b/moved/deep")).unwrap(), b"D");
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "D");
    // over an empty directory: fine; over a non-empty one: ENOTEMPTY
    fs::create_dir(m.join("empty")).unwrap();
    fs::rename(m.join("b/moved"), m.join("empty")).unwrap();
    assert_eq!(fs::read(m.join("empty/deep")).unwrap(), b"D");
    fs::create_dir(m.join("full")).unwrap();
    fs::write(m.join("full/x"), b"").unwrap();
    assert_errno(fs::rename(m.join("empty"), m.join("full")), libc::ENOTEMPTY);
    // file over directory and directory over file
    assert_errno(fs::rename(m.join("b/h"), m.join("full")), libc::EISDIR);
    assert_errno(fs::rename(m.join("full"), m.join("b/h")), libc::ENOTDIR);
    // a directory into itself
    assert_errno(fs::rename(m.join("full"), m.join("full/x/y")), libc::ENOTDIR);
    assert_errno(fs::rename(m.join("full"), m.join("full/inner")), libc::EINVAL);
    // RENAME_NOREPLACE
    assert_errno(rename2(&m.join("b/h"), &m.join("full/x"), libc::RENAME_NOREPLACE), libc::EEXIST);
    rename2(&m.join("b/h"), &m.join("full/new"), libc::RENAME_NOREPLACE).unwrap();
    assert_eq!(fs::read(m.join("full/new")).unwrap(), b"F");

    // hard links share data and count
    fs::write(m.join("orig"), b"shared").unwrap();
    fs::hard_link(m.join("orig"), m.join("b/link")).unwrap();
    assert_eq!(fs::metadata(m.join("orig")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(m.join("orig")).unwrap().ino(), fs::metadata(m.join("b/link")).unwrap().ino());
    fs::write(m.join("b/link"), b"changed").unwrap();
    assert_eq!(fs::read(m.join("orig")).unwrap(), b"changed");
    fs::remove_file(m.join("orig")).unwrap();
    assert_eq!(fs::read(m.join("b/link")).unwrap(), b"changed");
    assert_eq!(fs::metadata(m.join("b/link")).unwrap().nlink(), 1);
    assert_errno(fs::hard_link(m.join("full"), m.join("dirlink")), libc::EPERM);

    // symlinks
    std::os::unix::fs::symlink("b/link", m.join("sym")).unwrap();
    assert_eq!(fs::read_link(m.join("sym")).unwrap(), Path::new("b/link"));
    assert_eq!(fs::read(m.join("sym")).unwrap(), b"changed");
    assert!(fs::symlink_metadata(m.join("sym")).unwrap().file_type().is_symlink());
    std::os::unix::fs::symlink("nowhere", m.join("dangling")).unwrap();
    assert_errno(fs::read(m.join("dangling")), libc::ENOENT);
    assert_errno(fs::read_link(m.join("b/link")), libc::EINVAL);
    fs::remove_file(m.join("sym")).unwrap();
    assert_eq!(fs::read(m.join("b/link")).unwrap(), b"changed");
}

/// A deterministic pattern so any misplaced byte shows.
fn pattern(off: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| ((off + i).wrapping_mul(2654435761) >> 13) as u8).collect()
}

#[test]
fn data_across_stripe_boundaries() {
    // 3 servers, 4 KiB units: every few KiB is another server.
    let c = ClusterSpec::new().storage(3).stripe_unit(4096).start();
    let m = c.mount();
    let p = m.join("striped");
    let size = 100_000u64;
    let f = OpenOptions::new().read(true).write(true).create(true).open(&p).unwrap();
    // odd-sized writes at odd offsets, covering the file
    let mut off = 0u64;
    for (i, len) in [1usize, 4095, 4097, 3, 12_288, 8191, 70_000].iter().cycle().enumerate() {
        if off >= size || i > 100 {
            break;
        }
        let len = (*len as u64).min(size - off) as usize;
        f.write_all_at(&pattern(off, len), off).unwrap();
        off += len as u64;
    }
    assert_eq!(fs::metadata(&p).unwrap().len(), size);
    // read back in different chunkings
    assert_eq!(fs::read(&p).unwrap(), pattern(0, size as usize));
    for (o, l) in [(4090u64, 20usize), (0, 4096), (4096, 4096), (8000, 50_000), (99_990, 100)] {
        let mut buf = vec![0u8; l];
        let n = f.read_at(&mut buf, o).unwrap();
        let want = (size.saturating_sub(o) as usize).min(l);
        assert_eq!(n, want);
        assert_eq!(&buf[..n], &pattern(o, n)[..], "read {l} at {o}");
    }
    // each server holds only its own units (sparse elsewhere)
    for i in 0..3 {
        let copy = fs::read(c.export(i).join("striped")).unwrap();
        for unit in 0..(size / 4096) {
            let r = (unit * 4096) as usize..((unit + 1) * 4096) as usize;
            if unit % 3 == i as u64 {
                assert_eq!(&copy[r.clone()], &pattern(r.start as u64, 4096)[..], "server {i} unit {unit}");
            } else if r.end <= copy.len() {
                assert!(copy[r].iter().all(|b| *b == 0), "server {i} has data of unit {unit}");
            }
        }
    }

    // sparse: a hole in the middle reads as zeros; size from the farthest unit
    let s = m.join("sparse");
    let f2 = OpenOptions::new().write(true).create(true).open(&s).unwrap();
    f2.write_all_at(b"end", 50_000).unwrap();
    let data = fs::read(&s).unwrap();
    assert_eq!(data.len(), 50_003);
    assert!(data[..50_000].iter().all(|b| *b == 0));
    assert_eq!(&data[50_000..], b"end");
    // a file whose last unit is on server 0 while the others hold earlier data
    f2.write_all_at(b"x", 0).unwrap();
    f2.set_len(4096 * 3 + 1).unwrap();
    let data = fs::read(&s).unwrap();
    assert_eq!(data.len(), 4096 * 3 + 1);
    assert_eq!(data[0], b'x');
    assert!(data[1..].iter().all(|b| *b == 0));

    // O_APPEND lands at the volume's end even when the end is on another server
    let a = m.join("appended");
    let mut expect = Vec::new();
    for i in 0..20 {
        let chunk = pattern(i * 1000, 1500 + i as usize * 7);
        let mut f = OpenOptions::new().append(true).create(true).open(&a).unwrap();
        f.write_all(&chunk).unwrap();
        expect.extend_from_slice(&chunk);
    }
    assert_eq!(fs::read(&a).unwrap(), expect);
    // seek + write + read through one descriptor
    let mut g = OpenOptions::new().read(true).write(true).open(&a).unwrap();
    g.seek(SeekFrom::Start(4094)).unwrap();
    g.write_all(b"ABCD").unwrap();
    g.seek(SeekFrom::Start(4092)).unwrap();
    let mut b8 = [0u8; 8];
    g.read_exact(&mut b8).unwrap();
    assert_eq!(&b8[2..6], b"ABCD");
}

#[test]
fn offsets_past_4_gib() {
    let c = ClusterSpec::new().start();
    let p = c.path("big");
    let f = OpenOptions::new().read(true).write(true).create(true).open(&p).unwrap();
    let far = (5u64 << 30) + 12_345;
    let data = pattern(far, 300_000);
    f.write_all_at(&data, far).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().len(), far + 300_000);
    let mut back = vec![0u8; 300_000];
    f.read_exact_at(&mut back, far).unwrap();
    assert_eq!(back, data);
    // the hole just below 4 GiB reads as zeros
    let mut hole = vec![1u8; 8192];
    f.read_exact_at(&mut hole, (4u64 << 30) - 4096).unwrap();
    assert!(hole.iter().all(|b| *b == 0));
    // sparse on every server: far less allocated than the size
    assert!(fs::metadata(&p).unwrap().blocks() * 512 < 64 << 20);
    f.set_len(far + 10).unwrap();
    let mut tail = vec![0u8; 100];
    assert_eq!(f.read_at(&mut tail, far).unwrap(), 10);
    assert_eq!(&tail[..10], &data[..10]);
}

#[test]
fn gateway_metrics_count_operations() {
    let c = ClusterSpec::new().start();
    fs::write(c.path("m"), b"1").unwrap();
    let _ = fs::metadata(c.path("nope"));
    let url = c.gateways[0].daemon.metrics_url().expect("gateway metrics URL");
    let text = http_get(&url);
    assert!(text.contains("imca_gateway_ops_total{op=\"create\",result=\"ok\"}"), "{text}");
    assert!(text.contains("imca_gateway_ops_total{op=\"lookup\",result=\"enoent\"}"), "{text}");
    assert!(text.contains("imca_gateway_op_duration_seconds_bucket{op=\"write\""), "{text}");
}

#[test]
fn mount_refuses_a_busy_or_missing_mount_point() {
    let c = ClusterSpec::new().storage(1).start();
    let run = |mnt: &Path| {
        let out = std::process::Command::new(IMCA)
            .args(["mount", "--storage-servers", &c.storage_addrs().join(",")])
            .arg("--secret-file")
            .arg(c.secret_file())
            .arg(mnt)
            .output()
            .unwrap();
        assert!(!out.status.success(), "mount on {} should fail", mnt.display());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let busy = run(c.mount());
    assert!(busy.contains("busy"), "{busy}");
    let missing = run(&c.dir.path().join("no-such-dir"));
    assert!(missing.contains("does not exist"), "{missing}");
    // the live mount is untouched
    fs::write(c.path("still"), b"ok").unwrap();
    assert_eq!(fs::read(c.path("still")).unwrap(), b"ok");
}
