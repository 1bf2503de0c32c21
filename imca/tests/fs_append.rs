//! `O_APPEND` across gateways on one volume: every gateway's appends land
//! whole and none is lost (the file's ordering server gives the turns), and
//! readers through the same or another gateway see each append once it is
//! answered (appending opens bypass the kernel's pages; the gateway drops
//! what other openers cached).

mod common;

use common::*;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;

/// Record `i` of writer `w`: lengths vary (so a torn or interleaved record
/// shows), and a few cross a 4 KiB page.
fn record(w: usize, i: usize) -> String {
    let pad = "abcdefghijklmnopqrstuvwxyz".repeat(1 + (i * 7 + w * 3) % 11);
    format!("w{w:02} {i:05} {pad} end\n")
}

fn appender(path: PathBuf) -> File {
    OpenOptions::new().append(true).open(path).unwrap()
}

/// Every writer's `per_writer` records are in `text` exactly once, whole,
/// and in each writer's own order; nothing else is.
fn check_records(text: &str, writers: usize, per_writer: usize) {
    assert!(text.ends_with('\n'), "the file ends with a whole record");
    let mut seen = HashSet::new();
    let mut next = vec![0usize; writers];
    for line in text.split_inclusive('\n') {
        let (w, i) = parse(line).unwrap_or_else(|| panic!("not a whole record: {line:?}"));
        assert!(w < writers && i < per_writer, "unknown record {line:?}");
        assert_eq!(line, record(w, i), "record {w}/{i} intact");
        assert!(seen.insert((w, i)), "record {w}/{i} twice");
        assert_eq!(i, next[w], "writer {w}'s records in its order");
        next[w] += 1;
    }
    assert_eq!(seen.len(), writers * per_writer, "every record present");
}

fn parse(line: &str) -> Option<(usize, usize)> {
    let mut f = line.split(' ');
    let w = f.next()?.strip_prefix('w')?.parse().ok()?;
    let i = f.next()?.parse().ok()?;
    Some((w, i))
}

/// `threads` writers on each of the cluster's gateways append at once.
fn race(c: &Cluster, threads: usize, per_writer: usize) {
    let gateways = c.gateways.len();
    fs::write(c.path_at(0, "log"), b"").unwrap();
    let writers: Vec<_> = (0..gateways * threads)
        .map(|w| {
            let mut f = appender(c.path_at(w % gateways, "log"));
            thread::spawn(move || {
                for i in 0..per_writer {
                    // one write(2) per record, as a logger does
                    let r = record(w, i);
                    assert_eq!(f.write(r.as_bytes()).unwrap(), r.len(), "a short append");
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    for g in 0..gateways {
        let text = fs::read_to_string(c.path_at(g, "log")).unwrap();
        check_records(&text, gateways * threads, per_writer);
    }
}

#[test]
fn appends_from_two_gateways_keep_every_record() {
    let c = ClusterSpec::new().gateways(2).start();
    race(&c, 2, 150);
}

#[test]
fn appends_from_four_gateways_with_cache_nodes_keep_every_record() {
    let c = ClusterSpec::new().cache(Cache::Imca(2)).gateways(4).start();
    race(&c, 1, 100);
}

#[test]
fn appends_without_kernel_caching_keep_every_record() {
    let c = ClusterSpec::new().kernel_cache(false).gateways(2).start();
    race(&c, 1, 100);
}

/// A reader holding the file open (its pages cached) through the appending
/// gateway and through another sees each append as soon as it returns.
#[test]
fn readers_see_each_append_once_it_returns() {
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "log"), b"").unwrap();
    let readers = [File::open(c.path_at(0, "log")).unwrap(), File::open(c.path_at(1, "log")).unwrap()];
    let mut appenders = [appender(c.path_at(0, "log")), appender(c.path_at(1, "log"))];
    let mut expect = String::new();
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..60 {
        let r = record(i % 2, i);
        appenders[i % 2].write_all(r.as_bytes()).unwrap();
        expect.push_str(&r);
        for (g, f) in readers.iter().enumerate() {
            let n = f.read_at(&mut buf, 0).unwrap();
            assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), expect, "append {i} read through gateway {g}");
            assert_eq!(f.metadata().unwrap().len(), expect.len() as u64, "size through gateway {g}");
        }
    }
}

/// One gateway appends while another reads the file over and over: each
/// read is a run of whole records from the start, in order (the one being
/// written may show in part), and the last read has them all.
#[test]
fn a_reader_on_another_gateway_sees_a_growing_run_of_records() {
    const RECORDS: usize = 300;
    let c = ClusterSpec::new().gateways(2).start();
    fs::write(c.path_at(0, "log"), b"").unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (mut f, done) = (appender(c.path_at(0, "log")), done.clone());
        thread::spawn(move || {
            for i in 0..RECORDS {
                f.write_all(record(0, i).as_bytes()).unwrap();
            }
            done.store(true, SeqCst);
        })
    };
    let path = c.path_at(1, "log");
    let (mut reads, mut longest) = (0, 0);
    loop {
        let finished = done.load(SeqCst);
        let text = fs::read(&path).unwrap();
        // Whole records from the start; what follows the last newline is
        // the start of the record being written.
        let whole = text.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
        let lines = std::str::from_utf8(&text[..whole]).expect("whole records are text");
        for (i, line) in lines.split_inclusive('\n').enumerate() {
            assert_eq!(line, record(0, i), "read {reads}: record {i}");
        }
        assert!(whole >= longest, "read {reads} shrank from {longest} to {whole} bytes");
        longest = whole;
        reads += 1;
        if finished {
            assert_eq!(whole, text.len());
            check_records(lines, 1, RECORDS);
            break;
        }
    }
    writer.join().unwrap();
    assert!(reads > 1);
}
