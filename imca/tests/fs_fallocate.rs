//! fallocate through real mounts (two gateways, a bank of two cache nodes,
//! two storage servers): each mode the kernel passes on leaves a file
//! byte for byte and in size as it leaves the same file on a local ext4
//! file system, seen through the gateway that asked and through another
//! whose kernel and the bank held the old bytes; the space moves as it
//! should (allocating grows `st_blocks`, punching shrinks it); the modes
//! FUSE does not pass, and ranges Linux refuses, fail as Linux fails them.
//! Then a small fsx: random writes, truncates, fallocates of every mode
//! and reads through both gateways, checked against the local file
//! (2,000 operations; `IMCA_FSX_OPS=n` for more).

mod common;

use common::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The stripe unit, and the bank's block size (the default): ranges below
/// cross units, servers and blocks, aligned and not.
const UNIT: u64 = 128 * 1024;
const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;

fn old_byte(x: u64) -> u8 {
    (x % 251) as u8 + 1
}

fn fallocate(p: &Path, mode: i32, offset: i64, len: i64) -> std::io::Result<()> {
    let f = OpenOptions::new().read(true).write(true).open(p)?;
    match unsafe { libc::fallocate(f.as_raw_fd(), mode, offset, len) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A local ext4 directory to compare with (the root file system here).
fn local_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("imca-fallocate-").tempdir_in("/var/tmp").expect("a dir under /var/tmp")
}

fn cluster() -> Cluster {
    ClusterSpec::new().stripe_unit(UNIT).cache(Cache::Imca(2)).gateways(2).start()
}

fn assert_same(what: &str, got: &Path, want: &Path) {
    let (g, w) = (std::fs::read(got).unwrap(), std::fs::read(want).unwrap());
    assert_eq!(g.len(), w.len(), "{what}: size");
    if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
        panic!("{what}: byte {i} is {} where ext4 has {} (size {})", g[i], w[i], g.len());
    }
    assert_eq!(std::fs::metadata(got).unwrap().len(), std::fs::metadata(want).unwrap().len(), "{what}: st_size");
}

#[test]
fn every_mode_matches_ext4_through_both_gateways_and_the_bank() {
    let c = cluster();
    let local = local_dir();
    let size = 6 * UNIT + 123;
    let content: Vec<u8> = (0..size).map(old_byte).collect();
    let s = size as i64;
    let u = UNIT as i64;
    // (name, mode, offset, len, how st_blocks must move: +1 grow, -1 shrink, 0 any)
    let cases: &[(&str, i32, i64, i64, i32)] = &[
        ("allocate-inside", 0, 3 * u + 100, 2 * u, 0),
        ("allocate-extends", 0, s - 1000, 3 * u, 1),
        ("keep-size-past-end", KEEP, s - 100, 3 * u, 1),
        ("punch-across-units", PUNCH | KEEP, u / 2, 3 * u + 77, -1),
        ("punch-past-end", PUNCH | KEEP, 5 * u + 9, 4 * u, -1),
        ("zero-inside", ZERO, 2 * u + 5, u, 0),
        ("zero-extends", ZERO, s - 10, u + 3, 0),
        ("zero-keep-size-past-end", ZERO | KEEP, s - 100, 2 * u, 0),
        ("punch-one-block", PUNCH | KEEP, 4 * u, u, -1),
    ];
    for &(name, mode, offset, len, blocks) in cases {
        let (p0, p1, pl) = (c.path_at(0, name), c.path_at(1, name), local.path().join(name));
        std::fs::write(&p0, &content).unwrap();
        std::fs::write(&pl, &content).unwrap();
        // gateway 1's kernel and the bank hold the old bytes
        assert_eq!(std::fs::read(&p1).unwrap(), content, "{name}: before");
        assert_eq!(std::fs::read(&p1).unwrap(), content, "{name}: before, again");
        let before = std::fs::metadata(&p0).unwrap().blocks();

        fallocate(&p0, mode, offset, len).unwrap_or_else(|e| panic!("{name}: fallocate through gateway 0: {e}"));
        fallocate(&pl, mode, offset, len).unwrap_or_else(|e| panic!("{name}: fallocate on ext4: {e}"));

        assert_same(&format!("{name} through gateway 1"), &p1, &pl);
        assert_same(&format!("{name} through gateway 0"), &p0, &pl);
        let after = std::fs::metadata(&p0).unwrap().blocks();
        match blocks {
            1 => assert!(after > before, "{name}: st_blocks {before} -> {after} should grow"),
            -1 => assert!(after < before, "{name}: st_blocks {before} -> {after} should shrink"),
            _ => {}
        }
        // the other gateway sees the same space
        assert_eq!(std::fs::metadata(&p1).unwrap().blocks(), after, "{name}: st_blocks through gateway 1");
    }
}

#[test]
fn modes_fuse_does_not_pass_and_ranges_linux_refuses_fail_as_on_ext4() {
    let c = cluster();
    let local = local_dir();
    let (p, pl) = (c.path("f"), local.path().join("f"));
    let content: Vec<u8> = (0..4 * UNIT).map(old_byte).collect();
    std::fs::write(&p, &content).unwrap();
    std::fs::write(&pl, &content).unwrap();
    let u = UNIT as i64;
    // FUSE passes only keep-size, punch hole and zero range
    for mode in [libc::FALLOC_FL_COLLAPSE_RANGE, libc::FALLOC_FL_INSERT_RANGE, libc::FALLOC_FL_UNSHARE_RANGE] {
        assert_errno(fallocate(&p, mode, u, u), libc::EOPNOTSUPP);
    }
    // what the VFS refuses, before any file system is asked
    for (mode, offset, len) in [
        (PUNCH, 0, u),                         // punching must keep the size
        (PUNCH | ZERO | KEEP, 0, u),           // two modes at once
        (0, 0, 0),                             // an empty range
        (0, -1, u),                            // a negative offset
        (0, i64::MAX - 10, 100),               // past the largest offset
        (PUNCH | KEEP, i64::MAX - 10, 100),
    ] {
        let want = errno(&fallocate(&pl, mode, offset, len).unwrap_err());
        assert_errno(fallocate(&p, mode, offset, len), want);
    }
    // nothing changed
    assert_eq!(std::fs::read(&p).unwrap(), content);
    assert_eq!(std::fs::read(c.path_at(1, "f")).unwrap(), content);
}

/// A deterministic xorshift, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn a_small_fsx_with_every_fallocate_mode_stays_clean() {
    let c = cluster();
    let local = local_dir();
    let (paths, pl): ([PathBuf; 2], PathBuf) = ([c.path_at(0, "fsx"), c.path_at(1, "fsx")], local.path().join("fsx"));
    File::create(&paths[0]).unwrap();
    File::create(&pl).unwrap();
    let files = [
        OpenOptions::new().read(true).write(true).open(&paths[0]).unwrap(),
        OpenOptions::new().read(true).write(true).open(&paths[1]).unwrap(),
    ];
    let lf = OpenOptions::new().read(true).write(true).open(&pl).unwrap();
    let max = 8 * UNIT;
    let modes = [0, KEEP, PUNCH | KEEP, ZERO, ZERO | KEEP];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let ops = std::env::var("IMCA_FSX_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    for op in 0..ops {
        let g = rng.below(2) as usize;
        let (f, offset) = (&files[g], rng.below(max));
        let len = 1 + rng.below((max - offset).min(3 * UNIT));
        let what = match rng.below(10) {
            0..=2 => {
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                f.write_all_at(&data, offset).unwrap();
                lf.write_all_at(&data, offset).unwrap();
                format!("write {offset}+{len}")
            }
            3 => {
                f.set_len(offset).unwrap();
                lf.set_len(offset).unwrap();
                format!("truncate {offset}")
            }
            4..=6 => {
                let mode = modes[rng.below(modes.len() as u64) as usize];
                let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) };
                assert_eq!(r, 0, "op {op}: fallocate {mode:#x} {offset}+{len}: {}", std::io::Error::last_os_error());
                assert_eq!(unsafe { libc::fallocate(lf.as_raw_fd(), mode, offset as i64, len as i64) }, 0);
                format!("fallocate {mode:#x} {offset}+{len}")
            }
            _ => "read".to_string(),
        };
        // every op is checked through both gateways: a read where it
        // changed, and the sizes
        let size = lf.metadata().unwrap().len();
        for (k, f) in files.iter().enumerate() {
            assert_eq!(f.metadata().unwrap().len(), size, "op {op} ({what}): size through gateway {k}");
        }
        let (at, n) = (offset.min(size), (len + UNIT).min(size - offset.min(size)));
        let mut want = vec![0u8; n as usize];
        lf.read_exact_at(&mut want, at).unwrap();
        for (k, f) in files.iter().enumerate() {
            let mut got = vec![0u8; n as usize];
            f.read_exact_at(&mut got, at).unwrap_or_else(|e| panic!("op {op} ({what}): read through gateway {k}: {e}"));
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!("op {op} ({what}): gateway {k} has {} at {} where ext4 has {}", got[i], at + i as u64, want[i]);
            }
        }
    }
    drop(files);
    for p in &paths {
        assert_same("the whole file after the run", p, &pl);
    }
}
