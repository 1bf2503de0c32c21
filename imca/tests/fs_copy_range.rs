//! copy_file_range(2) through real mounts: made by the storage servers
//! when source and destination units land on the same servers (the bytes
//! never cross the gateway), by the kernel's reads and writes otherwise;
//! coherent with the bank and with another gateway that read the old bytes.

mod coherence_support;
mod common;

use coherence_support::http;
use common::{Cache, Cluster, ClusterSpec};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

// (a multiple of the bank's block, 128 KiB, or the gateways read around the bank)
const UNIT: u64 = 128 << 10;

fn cluster() -> Cluster {
    ClusterSpec::new().stripe_unit(UNIT).cache(Cache::Imca(2)).gateways(2).start()
}

/// Bytes that differ at every offset (a misplaced unit shows).
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| ((i / 7) as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8).collect()
}

/// One copy_file_range(2) call with explicit offsets.
fn copy(from: &File, off_in: u64, to: &File, off_out: u64, len: usize) -> std::io::Result<usize> {
    let (mut i, mut o) = (off_in as i64, off_out as i64);
    // SAFETY: two open fds and two offsets on the stack.
    let r = unsafe { libc::copy_file_range(from.as_raw_fd(), &mut i, to.as_raw_fd(), &mut o, len, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r as usize)
}

fn storage_sum(c: &Cluster, metric: &str, label: &str) -> f64 {
    c.storage.iter().filter_map(|d| d.metrics_url()).map(|u| http::sum(&common::http_get(&u), metric, &[label])).sum()
}

fn gateway_sum(c: &Cluster, g: usize, metric: &str, labels: &[&str]) -> f64 {
    let u = c.gateways[g].daemon.metrics_url().expect("gateway metrics");
    http::sum(&common::http_get(&u), metric, labels)
}

/// What moving file bytes through gateway 0 and the servers shows: bytes
/// read by the gateway, and reads and writes the servers served.
fn traffic(c: &Cluster) -> [f64; 3] {
    [
        gateway_sum(c, 0, "imca_gateway_read_bytes_total", &[]),
        storage_sum(c, "imca_storage_ops_total", "op=\"read\""),
        storage_sum(c, "imca_storage_ops_total", "op=\"write\""),
    ]
}

/// `got == want`, said briefly (the first byte that differs).
#[track_caller]
fn assert_bytes(got: Vec<u8>, want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!("{what}: {} bytes, {} wanted; first difference at {at:?}", got.len(), want.len());
    }
}

fn open_rw(p: &Path) -> File {
    OpenOptions::new().read(true).write(true).create(true).truncate(false).open(p).unwrap()
}

#[test]
fn copies_are_made_on_the_servers_and_seen_by_every_gateway() {
    let c = cluster();
    let len = (1 << 20) + 1234; // 8 units and a piece
    let src = pattern(len, 1);
    std::fs::write(c.path("src"), &src).unwrap();
    std::fs::write(c.path("dst"), pattern(len + 5000, 9)).unwrap();
    // Gateway 1's kernel (and the bank) hold the destination's old bytes.
    assert_bytes(std::fs::read(c.path_at(1, "dst")).unwrap(), &pattern(len + 5000, 9), "the old bytes");
    assert_bytes(std::fs::read(c.path_at(1, "dst")).unwrap(), &pattern(len + 5000, 9), "the old bytes, again");

    // Aligned (same offsets): one call, made by the servers.
    let (from, to) = (File::open(c.path("src")).unwrap(), open_rw(&c.path("dst")));
    let before = traffic(&c);
    assert_eq!(copy(&from, 0, &to, 0, len).unwrap(), len);
    let after = traffic(&c);
    assert!(storage_sum(&c, "imca_storage_ops_total", "op=\"copy_range\"") >= 2.0, "both servers copy their units");
    assert!(after[0] - before[0] < (len / 4) as f64, "the gateway read {} bytes for a {len}-byte copy", after[0] - before[0]);
    assert!(after[1] - before[1] < 4.0, "the servers served {} reads for the copy", after[1] - before[1]);
    assert!(after[2] - before[2] < 4.0, "the servers served {} writes for the copy", after[2] - before[2]);
    let mut want = src.clone();
    want.extend_from_slice(&pattern(len + 5000, 9)[len..]);
    assert_bytes(std::fs::read(c.path_at(0, "dst")).unwrap(), &want, "through the copying gateway");
    assert_bytes(std::fs::read(c.path_at(1, "dst")).unwrap(), &want, "through the gateway that read the old bytes");
    assert_bytes(std::fs::read(c.path_at(1, "dst")).unwrap(), &want, "again (from the bank)");

    // Aligned at another offset (a whole round of units further on): the
    // new file grows, with zeros before.
    let far = File::create(c.path("far")).unwrap();
    assert_eq!(copy(&from, 0, &open_rw(&c.path("far")), 2 * UNIT, len).unwrap(), len);
    drop(far);
    let mut want = vec![0u8; 2 * UNIT as usize];
    want.extend_from_slice(&src);
    assert_bytes(std::fs::read(c.path_at(1, "far")).unwrap(), &want, "far through gateway 1");
    assert_bytes(std::fs::read(c.path_at(0, "far")).unwrap(), &want, "far through gateway 0");

    // Unaligned: the kernel copies by reads and writes, and still does.
    let ops = storage_sum(&c, "imca_storage_ops_total", "op=\"copy_range\"");
    let odd = open_rw(&c.path("odd"));
    let mut done = 0;
    while done < len {
        let n = copy(&from, done as u64, &odd, 4096 + done as u64, len - done).unwrap();
        assert!(n > 0);
        done += n;
    }
    let mut want = vec![0u8; 4096];
    want.extend_from_slice(&src);
    assert_bytes(std::fs::read(c.path_at(0, "odd")).unwrap(), &want, "odd through gateway 0");
    assert_bytes(std::fs::read(c.path_at(1, "odd")).unwrap(), &want, "odd through gateway 1");
    // (it was asked, refused, and asked again: copy_file_range stays on)
    assert!(storage_sum(&c, "imca_storage_ops_total", "op=\"copy_range\"") == ops, "an unaligned copy reached a server");
    assert!(gateway_sum(&c, 0, "imca_gateway_ops_total", &["op=\"copy_range\""]) >= 3.0);

    // Past the source's end: short, then nothing.
    let tail = open_rw(&c.path("tail"));
    assert_eq!(copy(&from, len as u64 - 1000, &tail, len as u64 - 1000, 100_000).unwrap(), 1000);
    assert_eq!(copy(&from, len as u64, &tail, len as u64, 100_000).unwrap(), 0);
    let got = std::fs::read(c.path_at(1, "tail")).unwrap();
    assert_eq!(got.len(), len);
    assert_eq!(&got[len - 1000..], &src[len - 1000..]);
    assert!(got[..len - 1000].iter().all(|&b| b == 0));

    // Within one file, overlapping: EINVAL, as Linux.
    let same = open_rw(&c.path("src"));
    let e = copy(&same, 0, &same, 4096, 3 * UNIT as usize).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    // Within one file, apart (two rounds of units on): made.
    assert_eq!(copy(&same, 0, &same, 4 * UNIT, UNIT as usize).unwrap(), UNIT as usize);
    let mut want = src.clone();
    want.copy_within(0..UNIT as usize, 4 * UNIT as usize);
    assert_bytes(std::fs::read(c.path_at(1, "src")).unwrap(), &want, "src through gateway 1");
}

/// `cp` tries a clone (refused: EOPNOTSUPP), then copy_file_range(2) with
/// the largest count, again and again. (With `--reflink=never`, coreutils
/// 9.1 reads and writes instead: copy_file_range may clone. Checked with
/// strace.)
#[test]
fn cp_copies_a_big_file_on_the_servers() {
    let c = cluster();
    let len = (40 << 20) + 777; // past one call's bound (16 MiB)
    let src = pattern(len, 3);
    std::fs::write(c.path("big"), &src).unwrap();
    let cp = |flag: &str, to: &str| {
        let out = std::process::Command::new("cp").arg(flag).arg(c.path("big")).arg(c.path(to)).output().unwrap();
        assert!(out.status.success(), "cp {flag}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let before = traffic(&c);
    cp("--reflink=auto", "copy");
    let after = traffic(&c);
    assert!(storage_sum(&c, "imca_storage_ops_total", "op=\"copy_range\"") >= 6.0, "cp did not copy on the servers");
    assert!(after[0] - before[0] < (len / 4) as f64, "the gateway read {} bytes for a {len}-byte cp", after[0] - before[0]);
    assert!(after[2] - before[2] < 4.0, "the servers served {} writes for the cp", after[2] - before[2]);
    assert_bytes(std::fs::read(c.path_at(1, "copy")).unwrap(), &src, "copy through gateway 1");
    assert_bytes(std::fs::read(c.path_at(0, "copy")).unwrap(), &src, "copy through gateway 0");
    cp("--reflink=never", "by-reads");
    assert_bytes(std::fs::read(c.path_at(1, "by-reads")).unwrap(), &src, "by-reads through gateway 1");
}
