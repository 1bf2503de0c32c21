//! Seeded randomised differential test: the same random operations on the
//! mount and on a local reference directory must give the same results (the
//! same data or the same errno), and the two trees must stay identical.
//! Reproduce a failure with IMCA_SEED=<seed printed on failure>.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fs::{self, OpenOptions};
use std::io::Result as IoResult;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

const OPS: usize = 600;
const NAMES: [&str; 6] = ["a", "b", "c", "dir1", "dir2", "x"];

/// What an operation returned, comparable across the two trees.
#[derive(Debug, PartialEq)]
enum Out {
    Unit,
    Bytes(Vec<u8>),
    Count(usize),
    Stat { kind: char, size: u64, nlink: u64 },
    Names(Vec<String>),
    Err(i32),
}

fn out<T>(r: IoResult<T>, f: impl FnOnce(T) -> Out) -> Out {
    match r {
        Ok(v) => f(v),
        Err(e) => Out::Err(e.raw_os_error().unwrap_or(-1)),
    }
}

fn unit(r: IoResult<()>) -> Out {
    out(r, |_| Out::Unit)
}

/// A random relative path, usually one that exists, up to two levels deep.
fn random_path(rng: &mut StdRng, reference: &Path) -> String {
    let mut p = String::new();
    for depth in 0..3 {
        let name = NAMES[rng.random_range(0..NAMES.len())];
        let candidate = if p.is_empty() { name.to_string() } else { format!("{p}/{name}") };
        let is_dir = reference.join(&candidate).is_dir();
        p = candidate;
        if !is_dir || depth == 2 || rng.random_bool(0.4) {
            break;
        }
    }
    p
}

fn apply(op: u32, root: &Path, p: &str, q: &str, off: u64, data: &[u8], len: usize) -> Out {
    let (a, b) = (root.join(p), root.join(q));
    match op {
        0 => unit(fs::write(&a, data)),
        1 => unit(OpenOptions::new().write(true).open(&a).and_then(|f| f.write_all_at(data, off))),
        2 => out(fs::read(&a), Out::Bytes),
        3 => out(OpenOptions::new().read(true).open(&a).and_then(|f| {
            let mut buf = vec![0u8; len];
            let n = f.read_at(&mut buf, off)?;
            buf.truncate(n);
            Ok(buf)
        }), Out::Bytes),
        4 => unit(OpenOptions::new().write(true).open(&a).and_then(|f| f.set_len(off))),
        5 => unit(fs::create_dir(&a)),
        6 => unit(fs::remove_dir(&a)),
        7 => unit(fs::remove_file(&a)),
        8 => unit(fs::rename(&a, &b)),
        9 => unit(fs::hard_link(&a, &b)),
        10 => out(fs::symlink_metadata(&a), |m| Out::Stat {
            kind: if m.is_dir() { 'd' } else if m.file_type().is_symlink() { 'l' } else { 'f' },
            size: if m.is_dir() { 0 } else { m.len() },
            nlink: if m.is_dir() { 0 } else { m.nlink() },
        }),
        11 => out(fs::read_dir(&a), |it| {
            let mut v: Vec<String> = it.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            Out::Names(v)
        }),
        12 => unit(OpenOptions::new().append(true).open(&a).and_then(|mut f| std::io::Write::write_all(&mut f, data))),
        13 => unit(std::os::unix::fs::symlink(q, &a)),
        14 => out(fs::read_link(&a), |t| Out::Bytes(t.into_os_string().into_encoded_bytes())),
        _ => out(OpenOptions::new().write(true).create_new(true).open(&a), |_| Out::Count(0)),
    }
}

/// One path's kind and content (files: bytes; symlinks: target; dirs: names).
fn state(root: &Path, rel: &str) -> Out {
    let p = root.join(rel);
    match fs::symlink_metadata(&p) {
        Err(e) => Out::Err(e.raw_os_error().unwrap_or(-1)),
        Ok(m) if m.is_dir() => apply(11, root, rel, rel, 0, &[], 0),
        Ok(m) if m.file_type().is_symlink() => apply(14, root, rel, rel, 0, &[], 0),
        Ok(_) => apply(2, root, rel, rel, 0, &[], 0),
    }
}

/// Both trees, walked in order: (path, kind, content).
fn snapshot(root: &Path) -> Vec<(String, char, Vec<u8>)> {
    fn walk(root: &Path, rel: &Path, acc: &mut Vec<(String, char, Vec<u8>)>) {
        let mut entries: Vec<PathBuf> = fs::read_dir(root.join(rel)).unwrap().map(|e| rel.join(e.unwrap().file_name())).collect();
        entries.sort();
        for e in entries {
            let full = root.join(&e);
            let md = fs::symlink_metadata(&full).unwrap();
            let name = e.to_string_lossy().into_owned();
            if md.is_dir() {
                acc.push((name, 'd', Vec::new()));
                walk(root, &e, acc);
            } else if md.file_type().is_symlink() {
                acc.push((name, 'l', fs::read_link(&full).unwrap().into_os_string().into_encoded_bytes()));
            } else {
                acc.push((name, 'f', fs::read(&full).unwrap()));
            }
        }
    }
    let mut acc = Vec::new();
    walk(root, Path::new(""), &mut acc);
    acc
}

#[test]
fn random_operations_match_a_local_directory() {
    let seed: u64 = std::env::var("IMCA_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x1dca_2026);
    let mut rng = StdRng::seed_from_u64(seed);
    // small stripe units so random offsets cross servers often
    let c = ClusterSpec::new().storage(3).stripe_unit(4096).start();
    let reference = tempfile::tempdir().unwrap();
    let (mnt, refd) = (c.mount().to_path_buf(), reference.path().to_path_buf());

    for i in 0..OPS {
        let op = rng.random_range(0..16u32);
        let p = random_path(&mut rng, &refd);
        let q = random_path(&mut rng, &refd);
        let off = match rng.random_range(0..4) {
            0 => 0,
            1 => rng.random_range(0..5000),
            2 => rng.random_range(0..40_000),
            _ => 4096 * rng.random_range(0..10u64),
        };
        let len = rng.random_range(0..20_000);
        let data: Vec<u8> = (0..rng.random_range(0..12_000)).map(|_| rng.random()).collect();

        let want = apply(op, &refd, &p, &q, off, &data, len);
        let got = apply(op, &mnt, &p, &q, off, &data, len);
        assert_eq!(got, want, "seed {seed} op #{i}: op {op} p={p:?} q={q:?} off={off} len={len} data={}", data.len());
        // what the op touched is identical right away (whole trees below, now and then)
        for x in [&p, &q] {
            assert_eq!(state(&mnt, x), state(&refd, x), "seed {seed} op #{i}: {x:?} differs after op {op}");
        }
        if i % 100 == 99 || i == OPS - 1 {
            assert!(snapshot(&mnt) == snapshot(&refd), "seed {seed}: trees differ after op #{i}");
        }
    }
}
