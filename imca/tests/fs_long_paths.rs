//! Paths longer than PATH_MAX through the real FUSE mount (issue 11 part 3),
//! two storage servers, with and without cache nodes, checked against a
//! local directory: a tree deeper than 4,096 bytes of path is built with
//! `mkdirat`/`openat` (one syscall's path is limited, a tree is not), a file
//! renamed into it is read, stat'ed, listed (`ls -l`: no `-?????????`) and
//! removed by ordinary tools working from inside it, a second gateway
//! finds it too and renames a directory halfway down (the first one still
//! works inside it: by id), and `rm -rf` takes the whole tree down. The storage
//! servers reach each directory by its id, never by its full path.

mod common;

use common::*;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

/// 24 levels of 200-byte names: 4,824 bytes of path below the base.
const LEVELS: usize = 24;

fn name(i: usize) -> String {
    format!("{i:02}-{}", "n".repeat(197))
}

fn cs(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn ok(r: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if r < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(r)
    }
}

fn open_dir(at: libc::c_int, name: &str) -> OwnedFd {
    let fd = ok(unsafe { libc::openat(at, cs(name).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) }, name)
        .unwrap_or_else(|e| panic!("open {e}"));
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn write_at(dir: &OwnedFd, name: &str, data: &[u8]) {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    let fd = ok(unsafe { libc::openat(dir.as_raw_fd(), cs(name).as_ptr(), flags, 0o644) }, name).unwrap();
    let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    io::Write::write_all(&mut &f, data).unwrap();
}

/// A directory reachable by a short path whatever its depth: its fd's link
/// in /proc, which tools can use as their working directory.
fn here(dir: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), dir.as_raw_fd()))
}

/// `sh -c script` run inside `dir`: (success, stdout, stderr).
fn sh_in(dir: &OwnedFd, script: &str) -> (bool, String, String) {
    let out = Command::new("sh").arg("-c").arg(script).current_dir(here(dir)).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The tree under `base`: the base's fd and each level's fd, deepest last.
struct Tree {
    levels: Vec<OwnedFd>,
}

impl Tree {
    fn build(base: &Path) -> Tree {
        std::fs::create_dir(base).unwrap();
        let mut levels = vec![open_dir(libc::AT_FDCWD, base.to_str().unwrap())];
        for i in 0..LEVELS {
            let at = levels.last().unwrap().as_raw_fd();
            ok(unsafe { libc::mkdirat(at, cs(&name(i)).as_ptr(), 0o755) }, "mkdirat").unwrap();
            levels.push(open_dir(at, &name(i)));
        }
        Tree { levels }
    }

    fn base(&self) -> &OwnedFd {
        &self.levels[0]
    }

    fn deep(&self) -> &OwnedFd {
        self.levels.last().unwrap()
    }
}

/// What the tools say, made comparable between the mount and the local
/// directory (no times, owners or inode numbers).
#[derive(Debug, PartialEq)]
struct Seen {
    cat: String,
    stat: String,
    ls: Vec<String>,
    rm_then_ls: String,
}

fn exercise(base: &Path, moved_from: &Path) -> (Tree, Seen) {
    let t = Tree::build(base);
    // A file made at the top, renamed into the deep tree.
    let top = open_dir(libc::AT_FDCWD, moved_from.to_str().unwrap());
    write_at(&top, "file", b"from the top\n");
    ok(unsafe { libc::renameat(top.as_raw_fd(), cs("file").as_ptr(), t.deep().as_raw_fd(), cs("moved").as_ptr()) }, "renameat")
        .unwrap();
    write_at(t.deep(), "made-here", b"made in the deep\n");
    ok(unsafe { libc::mkdirat(t.deep().as_raw_fd(), cs("sub").as_ptr(), 0o700) }, "mkdirat sub").unwrap();

    let (good, cat, err) = sh_in(t.deep(), "cat moved made-here");
    assert!(good, "cat: {err}");
    let (good, stat, err) = sh_in(t.deep(), "stat -c '%n %s %F %a %h' moved made-here sub");
    assert!(good, "stat: {err}");
    let (good, ls, err) = sh_in(t.deep(), "ls -l");
    assert!(good, "ls -l: {err}");
    assert!(!ls.contains('?'), "ls -l shows every entry:\n{ls}");
    let ls = ls.lines().skip(1).map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        format!("{} {} {}", f[0], f[4], f[f.len() - 1])
    });
    let (good, rm_then_ls, err) = sh_in(t.deep(), "rm moved && ls");
    assert!(good, "rm: {err}");
    (t, Seen { cat, stat, ls: ls.collect(), rm_then_ls })
}

fn long_paths_as_on_a_local_disk(cache: Cache) {
    let c = ClusterSpec::new().storage(2).cache(cache).gateways(2).start();
    let local = tempfile::tempdir().unwrap();
    let (want_tree, want) = exercise(&local.path().join("deep"), local.path());
    let (tree, got) = exercise(&c.path("deep"), c.mount());
    assert_eq!(got, want);
    assert_eq!(got.cat, "from the top\nmade in the deep\n");

    // The servers hold the deep file (by its id, at a path past PATH_MAX).
    let depth_path: PathBuf = (0..LEVELS).map(name).collect();
    assert!(depth_path.as_os_str().len() > 4096);
    for s in 0..2 {
        let stat = sh_in(&open_dir(libc::AT_FDCWD, c.export(s).join("deep").to_str().unwrap()), "ls");
        assert!(stat.0 && stat.1.contains(&name(0)), "server {s} has the tree: {stat:?}");
    }

    // The other gateway walks down by name and reads the file made deep.
    let other = c.path_at(1, "deep");
    let mut levels = vec![open_dir(libc::AT_FDCWD, other.to_str().unwrap())];
    for i in 0..LEVELS {
        levels.push(open_dir(levels[i].as_raw_fd(), &name(i)));
    }
    let (good, cat, err) = sh_in(levels.last().unwrap(), "cat made-here; ls");
    assert!(good, "through gateway 1: {err}");
    assert_eq!(cat, "made in the deep\nmade-here\nsub\n");

    // Gateway 1 renames a directory halfway down; gateway 0 still knows the
    // old path of everything below it and reaches it by id.
    let mid = levels[10].as_raw_fd();
    ok(unsafe { libc::renameat(mid, cs(&name(10)).as_ptr(), mid, cs("renamed").as_ptr()) }, "renameat mid").unwrap();
    let (good, cat, err) = sh_in(tree.deep(), "cat made-here && ls && echo more > more && cat more");
    assert!(good, "gateway 0 under a directory renamed by gateway 1: {err}");
    assert_eq!(cat, "made in the deep\nmade-here\nsub\nmore\n");
    ok(unsafe { libc::renameat(mid, cs("renamed").as_ptr(), mid, cs(&name(10)).as_ptr()) }, "renameat back").unwrap();
    drop(levels);

    // rm -rf of the whole tree, from its base (GNU rm descends with openat).
    for (t, base) in [(&want_tree, local.path().join("deep")), (&tree, c.path("deep"))] {
        let (good, _, err) = sh_in(t.base(), &format!("rm -rf {}", name(0)));
        assert!(good, "rm -rf in {}: {err}", base.display());
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 0, "{} is empty", base.display());
    }
    drop(tree);
    for s in 0..2 {
        assert_eq!(std::fs::read_dir(c.export(s).join("deep")).unwrap().count(), 0, "server {s} is empty");
    }
}

#[test]
fn paths_longer_than_path_max_work_as_on_a_local_disk() {
    long_paths_as_on_a_local_disk(Cache::None);
}

#[test]
fn paths_longer_than_path_max_work_as_on_a_local_disk_with_cache_nodes() {
    long_paths_as_on_a_local_disk(Cache::Imca(2));
}
