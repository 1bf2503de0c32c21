//! Storage RPC micro-benchmark: the same operations on the same file, once
//! with direct syscalls (the peer: what the export's file system gives) and
//! once through protocol-client -> TCP (loopback) -> protocol-server -> posix.
//!
//! ```text
//! cargo run --release -p storage-server --example rpc_bench -- [DIR] [MiB]
//! ```
//! With a volume secret, as deployed; `IMCA_INSECURE=1` measures without
//! (authentication costs once per connection, at the handshake).
//! Prints a markdown table of ratios (RPC / local) for docs/benchmarks.md.

use bytes::Bytes;
use protocol_client::ClientOptions;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlator::*;

const REC: usize = 1 << 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let base = args.next().map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let mib: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(256);
    let dir = tempfile::tempdir_in(&base)?;
    let export = dir.path().to_path_buf();
    let insecure = std::env::var_os("IMCA_INSECURE").is_some_and(|v| v != "0");
    let secret = (!insecure).then(secret::Secret::generate);
    let mut sargs = storage_server::Args::new(&export);
    sargs.credentials = secret.clone().map_or_else(daemon::Credentials::insecure, daemon::Credentials::with);
    let server = storage_server::start(sargs).await?;
    let opts = ClientOptions { auth: secret.map(|s| s.key(secret::Purpose::RpcHandshake)), ..Default::default() };
    let c = Arc::new(protocol_client::connect(&server.addr.to_string(), opts).await?);

    let f = NewFile { name: "data".into(), fid: FileId::from_random(42), perm: 0o644, owner: Owner::default(), exclusive: true };
    c.create(&Loc::root(), &f, 0).await?;
    let loc = Loc::new("data", Some(f.fid));
    let local = std::fs::OpenOptions::new().read(true).write(true).open(export.join("data"))?;
    let total = (mib * REC) as u64;
    let block = Bytes::from(vec![0x5au8; REC]);

    let mut rows = Vec::new();
    // Sequential write, 1 MiB records. A first pass allocates the file, so
    // both peers then overwrite in place.
    for i in 0..mib {
        local.write_all_at(&block, (i * REC) as u64)?;
    }
    let t = Instant::now();
    for i in 0..mib {
        local.write_all_at(&block, (i * REC) as u64)?;
    }
    let lw = mbps(total, t.elapsed());
    let t = Instant::now();
    for i in 0..mib {
        let t1 = Instant::now();
        c.write(&loc, (i * REC) as u64, block.clone()).await?;
        if std::env::var_os("RPC_BENCH_VERBOSE").is_some() {
            eprintln!("write {i}: {:?}", t1.elapsed());
        }
    }
    let rw = mbps(total, t.elapsed());
    rows.push(("seq write 1 MiB, 1 thread (MB/s)", lw, rw));

    // Sequential read, 1 and 4 threads (page cache warm for both).
    for threads in [1usize, 4] {
        let t = Instant::now();
        let lf = Arc::new(local.try_clone()?);
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let lf = lf.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; REC];
                    for i in (k..mib).step_by(threads) {
                        lf.read_exact_at(&mut buf, (i * REC) as u64).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let lr = mbps(total, t.elapsed());
        let t = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                let (c, loc) = (c.clone(), loc.clone());
                tokio::spawn(async move {
                    for i in (k..mib).step_by(threads) {
                        let d = c.read(&loc, (i * REC) as u64, REC as u32).await.unwrap();
                        assert_eq!(d.len(), REC);
                    }
                })
            })
            .collect();
        for h in hs {
            h.await?;
        }
        let rr = mbps(total, t.elapsed());
        rows.push((if threads == 1 { "seq read 1 MiB, 1 thread (MB/s)" } else { "seq read 1 MiB, 4 threads (MB/s)" }, lr, rr));
    }

    // 4 KiB random reads: mean latency in µs.
    let n = 20_000u64;
    let blocks = total / 4096;
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut offs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        offs.push((x % blocks) * 4096);
    }
    let mut buf = vec![0u8; 4096];
    let t = Instant::now();
    for &o in &offs {
        local.read_exact_at(&mut buf, o)?;
    }
    let ll = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = Instant::now();
    for &o in &offs {
        c.read(&loc, o, 4096).await?;
    }
    let rl = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    rows.push(("4 KiB random read latency (µs, lower is better)", ll, rl));

    // Null round trip: flush does no file-system work on the server, so
    // this is the transport + codec + dispatch cost alone.
    let t = Instant::now();
    for _ in 0..n {
        c.flush(&loc).await?;
    }
    let nl = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    rows.push(("null RPC (flush) round trip (µs; peer: 4 KiB local pread)", ll, nl));

    // Stat rate: 1 in flight, and 32 in flight over the one connection.
    let n = 20_000u64;
    let p = export.join("data");
    let t = Instant::now();
    for _ in 0..n {
        std::fs::symlink_metadata(&p)?;
    }
    let ls = n as f64 / t.elapsed().as_secs_f64();
    let ploc = Loc::new("data", None);
    let t = Instant::now();
    for _ in 0..n {
        c.getattr(&ploc).await?;
    }
    let rs = n as f64 / t.elapsed().as_secs_f64();
    rows.push(("stat by path, 1 in flight (ops/s)", ls, rs));
    let t = Instant::now();
    let hs: Vec<_> = (0..32)
        .map(|_| {
            let (c, l) = (c.clone(), ploc.clone());
            tokio::spawn(async move {
                for _ in 0..n / 32 {
                    c.getattr(&l).await.unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.await?;
    }
    let rs32 = n as f64 / t.elapsed().as_secs_f64();
    rows.push(("stat by path, 32 in flight (ops/s)", ls, rs32));

    println!("| operation ({mib} MiB file, loopback) | local syscalls | storage RPC | RPC / local |");
    println!("|---|---:|---:|---:|");
    for (name, l, r) in rows {
        println!("| {name} | {l:.1} | {r:.1} | {:.2} |", r / l);
    }
    server.shutdown().await;
    Ok(())
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}
