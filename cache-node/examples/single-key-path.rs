//! The node's own CPU per single-key request, in-process: what a worker
//! spends between the bytes read and the reply composed (parse, lookup,
//! reply, counters), with no socket, scheduler or kernel in the number
//! (issue 14: on a shared 2-core VM the kernel's share of a TCP run swings
//! more than the whole difference between two builds).
//!
//! KEYS [200000] items of SIZE [100] bytes with 16-byte keys, then ROUNDS [5]
//! rounds of OPS [1000000] requests, 90 % `get` / 10 % `set` of random keys
//! (memaslap's mix), one request per `process_out` call as in a
//! request/reply load; prints the thread's CPU time per request per round.
//!   cargo run --release -p cache-node --example single-key-path

use std::sync::Arc;

use bytes::BytesMut;
use cache_node::out::Out;
use cache_node::session::Session;
use cache_node::{Config, Node};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// This thread's CPU time in nanoseconds.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// xorshift64: a fixed sequence, the same for every build.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn key(i: usize) -> String {
    format!("key:{i:012}")
}

fn main() {
    let (keys, size, rounds, ops) = (env("KEYS", 200_000), env("SIZE", 100), env("ROUNDS", 5), env("OPS", 1_000_000));
    let node = Arc::new(Node::new(Config { memory_bytes: 1 << 30, threads: 2, ..Config::local() }));
    let mut session = Session::new(node);
    let (mut input, mut out) = (BytesMut::with_capacity(16 * 1024), Out::with_capacity(16 * 1024));
    let value = vec![b'v'; size];
    let set = |input: &mut BytesMut, i: usize| {
        input.extend_from_slice(format!("set {} 0 0 {size}\r\n", key(i)).as_bytes());
        input.extend_from_slice(&value);
        input.extend_from_slice(b"\r\n");
    };
    for i in 0..keys {
        set(&mut input, i);
        session.process_out(&mut input, &mut out);
        out.clear(1 << 20);
    }
    // the request lines, made before the clock starts
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let reqs: Vec<Vec<u8>> = (0..ops)
        .map(|_| {
            let i = next(&mut rng) as usize % keys;
            let mut b = BytesMut::new();
            if next(&mut rng) % 10 == 0 {
                set(&mut b, i);
            } else {
                b.extend_from_slice(format!("get {}\r\n", key(i)).as_bytes());
            }
            b.to_vec()
        })
        .collect();
    for round in 1..=rounds {
        let t0 = cpu_ns();
        let mut bytes = 0;
        for r in &reqs {
            input.extend_from_slice(r);
            session.process_out(&mut input, &mut out);
            bytes += out.len();
            out.clear(1 << 20);
        }
        let per = (cpu_ns() - t0) as f64 / ops as f64;
        println!("round {round}: {per:.0} ns CPU per request ({size} B values, {keys} keys, {bytes} reply bytes)");
    }
}
