//! A pipelined multi-key read load in one of three forms, for measuring what
//! a server spends per key (issue 14): memaslap only sends text `get k1 k2 …`.
//!
//! - `get`: one text line of DEPTH keys (the bank's multi-get);
//! - `mg`: DEPTH meta `mg <key> v` requests, then `mn`, in one write;
//! - `getkq`: DEPTH binary GETKQ requests, then a NOOP, in one write.
//!
//! Each connection (its own thread) keeps one such batch in flight, with keys
//! drawn at random from KEYS keys stored first (values of SIZE bytes).
//! Prints keys/s; the server's CPU per key is for the caller to read
//! (`/proc/PID/stat`, `perf stat -p PID`) over the run.
//!
//!   cargo run --release -p cache-node --example pipeline-load -- \
//!       ADDR FORM [DEPTH=64] [CONNS=16] [SECS=8] [KEYS=200000] [SIZE=2048] [FILL=1]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Get,
    Mg,
    Getkq,
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> T {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn key(n: u64) -> String {
    format!("key:{n:08}")
}

/// Stores keys 0..n with values of `size` bytes (noreply, pipelined).
fn fill(addr: &str, n: u64, size: usize) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let value = vec![b'x'; size];
    for start in (0..n).step_by(500) {
        let mut req = Vec::new();
        for k in start..(start + 500).min(n) {
            req.extend_from_slice(format!("set {} 0 0 {size} noreply\r\n", key(k)).as_bytes());
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
        }
        s.write_all(&req).expect("fill");
    }
    s.write_all(b"mn\r\n").unwrap();
    read_until(&mut s, &mut Vec::new(), |b| b.ends_with(b"MN\r\n"));
}

/// One batch's request bytes.
fn request(form: Form, keys: &[u64], out: &mut Vec<u8>) {
    out.clear();
    match form {
        Form::Get => {
            out.extend_from_slice(b"get");
            for &k in keys {
                out.push(b' ');
                out.extend_from_slice(key(k).as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        }
        Form::Mg => {
            for &k in keys {
                out.extend_from_slice(format!("mg {} v\r\n", key(k)).as_bytes());
            }
            out.extend_from_slice(b"mn\r\n");
        }
        Form::Getkq => {
            let header = |out: &mut Vec<u8>, op: u8, key: &[u8]| {
                let mut h = [0u8; 24];
                (h[0], h[1]) = (0x80, op);
                h[2..4].copy_from_slice(&(key.len() as u16).to_be_bytes());
                h[8..12].copy_from_slice(&(key.len() as u32).to_be_bytes());
                out.extend_from_slice(&h);
                out.extend_from_slice(key);
            };
            for &k in keys {
                header(out, 0x0d, key(k).as_bytes());
            }
            header(out, 0x0a, b"");
        }
    }
}

/// Reads until `done` says the reply is whole.
fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) {
    buf.clear();
    let mut chunk = [0u8; 256 << 10];
    while !done(buf) {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "server closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:11211".into());
    let form = match args.get(2).map(String::as_str) {
        Some("get") | None => Form::Get,
        Some("mg") => Form::Mg,
        Some("getkq") => Form::Getkq,
        Some(f) => panic!("FORM is get, mg or getkq, not {f}"),
    };
    let (depth, conns, secs): (usize, usize, u64) = (arg(&args, 3, 64), arg(&args, 4, 16), arg(&args, 5, 8));
    let (nkeys, size, do_fill): (u64, usize, u8) = (arg(&args, 6, 200_000), arg(&args, 7, 2048), arg(&args, 8, 1));
    if do_fill == 1 {
        fill(&addr, nkeys, size);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let keys_done = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..conns)
        .map(|c| {
            let (addr, stop, keys_done) = (addr.clone(), stop.clone(), keys_done.clone());
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).expect("connect");
                s.set_nodelay(true).unwrap();
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (c as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d);
                let (mut req, mut reply, mut ks) = (Vec::new(), Vec::new(), vec![0u64; depth]);
                while !stop.load(Ordering::Relaxed) {
                    for k in ks.iter_mut() {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        *k = rng % nkeys;
                    }
                    request(form, &ks, &mut req);
                    s.write_all(&req).expect("write");
                    match form {
                        Form::Get => read_until(&mut s, &mut reply, |b| b.ends_with(b"END\r\n")),
                        Form::Mg => read_until(&mut s, &mut reply, |b| b.ends_with(b"MN\r\n")),
                        Form::Getkq => read_until(&mut s, &mut reply, |b| b.len() >= 24 && b[b.len() - 24] == 0x81 && b[b.len() - 23] == 0x0a),
                    }
                    keys_done.fetch_add(depth as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs)); // the run's length, not a wait for readiness
    stop.store(true, Ordering::Relaxed);
    let n = keys_done.load(Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    for t in threads {
        t.join().unwrap();
    }
    println!("{n} keys in {elapsed:.2} s: {:.0} keys/s", n as f64 / elapsed);
}
