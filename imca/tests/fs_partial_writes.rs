//! Through a real FUSE mount: one storage server's export is a small tmpfs
//! that fills during a write over several stripe units. The write returns a
//! short count (or ENOSPC if nothing landed), and the file holds no stretch
//! of zeros: its size is the old size or offset + count, the counted bytes
//! are the new data, everything else is old data or new data.

mod common;

use common::*;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const UNIT: u64 = 64 * 1024;

fn old_byte(x: u64) -> u8 {
    (x % 127) as u8 + 1
}

fn new_byte(x: u64) -> u8 {
    (x % 127) as u8 + 128
}

/// A tmpfs mounted over `at` for the test (needs root).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "imca-test"]).arg(at).status();
        assert!(ok.unwrap().success(), "mount tmpfs on {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system under `dir`, then free `leave` bytes of it.
fn fill_leaving(dir: &Path, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0x55u8; 64 * 1024];
    let mut len = 0u64;
    while let Ok(n @ 1..) = f.write(&chunk) {
        len += n as u64;
    }
    f.set_len(len.saturating_sub(leave)).unwrap();
}

#[test]
fn a_write_that_fills_one_server_leaves_no_zeros_in_the_file() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let mut c = ClusterSpec::new().stripe_unit(UNIT).start();
    // Storage server 1's export moves onto a 4 MiB tmpfs (what it holds so
    // far, its volume metadata, moves along), and it restarts there.
    c.storage[1].kill();
    let export = c.export(1);
    let staging = c.dir.path().join("staging");
    assert!(Command::new("cp").arg("-a").arg(&export).arg(&staging).status().unwrap().success());
    let _fs = Tmpfs::mount(&export, "4m");
    let copied = Command::new("cp").arg("-a").arg(staging.join(".")).arg(export.join(".")).status().unwrap();
    assert!(copied.success());
    c.storage[1].restart();

    let p = c.path("f");
    let old: Vec<u8> = (0..4 * UNIT).map(old_byte).collect();
    // the gateway reconnects to the restarted server by itself
    let start = std::time::Instant::now();
    while let Err(e) = std::fs::write(&p, &old) {
        assert!(start.elapsed().as_secs() < 30, "writing the old content: {e}");
        std::thread::yield_now();
    }
    fill_leaving(&export, UNIT / 2);

    let (off, len) = (2 * UNIT, 8 * UNIT);
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    let r = f.write_at(&(off..off + len).map(new_byte).collect::<Vec<u8>>(), off);
    drop(f);
    eprintln!("write [{off}, +{len}) over old size {}: {r:?}", old.len());
    let n = r.expect("a short count: the first units fit") as u64;
    assert!(n > 0 && n < len, "{n}");
    let back = std::fs::read(&p).unwrap();
    assert_eq!(back.len() as u64, (4 * UNIT).max(off + n), "old size or offset + count");
    for (x, &b) in back.iter().enumerate() {
        let x = x as u64;
        if x < off {
            assert_eq!(b, old_byte(x), "byte {x}");
        } else if x < off + n {
            assert_eq!(b, new_byte(x), "byte {x} was counted, so it is new data");
        } else {
            assert!(b == old_byte(x) || b == new_byte(x), "byte {x} past the count is {b}");
        }
    }
}
