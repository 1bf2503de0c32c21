//! B4 (throughput): one large file read by T client processes at once,
//! each a contiguous slice, for each T of the sweep. Reported: aggregate
//! MB/s (file size over the time from the first client's start to the last
//! one's end, on the machine-wide monotonic clock) vs T; the node count is
//! part of the stated configuration (the suite draws one line per target).

use crate::client::{Job, Span};
use crate::config::System;
use crate::outcome::Outcome;
use crate::pool::Pool;
use crate::progress::Progress;
use crate::records;
use crate::stats::Summary;
use crate::util::maybe_drop;
use crate::Common;
use std::io::Write;

pub const ABOUT: &str = "B4 (throughput): one large file read by 1..8 client processes.

Untimed: write one file of --size bytes (1 GiB; --quick: 32 MiB) to
DIR/imca-bench-b4 (kept with --keep), then read it once (warm: the bank and
caches hold what they can; skipped with --cold, which instead drops the
kernel caches before every timed read, root). Timed, for each T of
--threads (default 1..8; --quick: 1,2): T client processes, released by a
barrier, each read a contiguous 1/T of the file in --record-byte preads
(128 KiB). Reported: aggregate MB/s (10^6 bytes/s: file size over first
start to last end), per-reader MB/s mean and stddev. Figure: MB/s vs
readers; compare node counts by running against clusters with 0, 1, 2, 4
cache nodes (`imca bench suite` draws one line per target).

Dissertation: 868 MB/s with 4 cache nodes vs 417 MB/s without (2.08x).";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// File size in bytes (suffixes K, M, G: powers of 1024). Default 1G; --quick: 32M.
    #[arg(long)]
    pub size: Option<String>,
    /// Bytes per read request.
    #[arg(long, default_value_t = 128 << 10)]
    pub record: usize,
    /// Read with O_DIRECT (no page cache).
    #[arg(long)]
    pub direct: bool,
    /// Reuse the file of an earlier run if it has the right size.
    #[arg(long)]
    pub keep: bool,
}

/// "1G", "32M", "4096", "64K" as bytes.
pub fn parse_size(s: &str) -> anyhow::Result<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last().map(|(i, c)| (i, c.to_ascii_uppercase())) {
        Some((i, 'K')) => (&s[..i], 1u64 << 10),
        Some((i, 'M')) => (&s[..i], 1 << 20),
        Some((i, 'G')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| anyhow::anyhow!("not a size: {s:?} (e.g. 4096, 64K, 32M, 1G)"))?;
    n.checked_mul(mult).filter(|&b| b > 0).ok_or_else(|| anyhow::anyhow!("size out of range: {s:?}"))
}

pub fn spec() -> crate::figure::Spec {
    crate::figure::Spec {
        title: "B4 throughput: one file, T readers".into(),
        x: "threads",
        x_label: "reader processes",
        y_label: "aggregate MB/s",
        log_x: false,
        ys: vec![("mb_per_s", "MB/s")],
        group_by: None,
    }
}

pub fn run(a: &Args, system: &System) -> anyhow::Result<Outcome> {
    let c = &a.common;
    let size = match &a.size {
        Some(s) => parse_size(s)?,
        None if c.quick => 32 << 20,
        None => 1 << 30,
    };
    let record = a.record.max(1);
    let threads = c.clients_or(&[1, 2, 3, 4, 5, 6, 7, 8], &[1, 2]);
    let dir = c.dir.join("imca-bench-b4");
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("big");
    if !(a.keep && std::fs::metadata(&file).map(|m| m.len() == size).unwrap_or(false)) {
        write_file(&file, size, c.quiet)?;
    }
    if !c.cold {
        let p = Progress::new("B4 warm read", c.quiet);
        records::read_slice(&file, 0, size, 1 << 20, false)?;
        p.done();
    }
    let run = serde_json::json!({"size_bytes": size, "record": record, "threads": threads, "direct": a.direct});
    let mut o = crate::outcome("B4", "throughput", c, system, run);
    o.columns = ["threads", "file_mib", "mb_per_s", "seconds", "reader_mb_per_s_mean", "reader_mb_per_s_stddev"]
        .map(String::from)
        .to_vec();
    let progress = Progress::new("B4", c.quiet);
    for (step, &t) in threads.iter().enumerate() {
        progress.step(step + 1, threads.len(), &format!("{t} readers"));
        let job = Job::Read { file: file.clone(), size, clients: t, record, direct: a.direct };
        let mut pool = Pool::spawn(&job, t, &c.mounts())?;
        pool.leader().barrier_then(|| maybe_drop(c.cold))?;
        let spans: Vec<Span> = pool.leader().gather()?;
        pool.finish()?;
        let first = spans.iter().map(|s| s.start_ns).min().unwrap_or(0);
        let last = spans.iter().map(|s| s.end_ns).max().unwrap_or(0);
        let secs = (last.saturating_sub(first)).max(1) as f64 / 1e9;
        let bytes: u64 = spans.iter().map(|s| s.bytes).sum();
        anyhow::ensure!(bytes == size, "the readers read {bytes} bytes of {size}");
        let per: Vec<f64> =
            spans.iter().map(|s| s.bytes as f64 / 1e6 / ((s.end_ns.saturating_sub(s.start_ns)).max(1) as f64 / 1e9)).collect();
        let ps = Summary::of(&per);
        o.rows.push(vec![t as f64, size as f64 / (1u64 << 20) as f64, size as f64 / 1e6 / secs, secs, ps.mean, ps.stddev]);
    }
    progress.done();
    if !a.keep {
        std::fs::remove_file(&file)?;
        let _ = std::fs::remove_dir(&dir);
    }
    Ok(o)
}

fn write_file(path: &std::path::Path, size: u64, quiet: bool) -> anyhow::Result<()> {
    let p = Progress::new("B4 write", quiet);
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let chunk: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let mut left = size;
    let total = size.div_ceil(1 << 20) as usize;
    let mut i = 0;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
        i += 1;
        if i % 64 == 0 {
            p.step(i, total, "MiB");
        }
    }
    f.flush()?;
    p.done();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("32M").unwrap(), 32 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert!(parse_size("0").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999G").is_err());
    }
}
