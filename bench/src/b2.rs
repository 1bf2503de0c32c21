//! B2 (latency): for record sizes r = 1 B, 2 B, … up to `--max`: write 1024
//! records of r bytes sequentially to a fresh file, then (after reopening)
//! read them back from the start the same way. Reported: mean µs per write
//! and per read, per r.

use crate::util::drop_caches;
use crate::Common;
use std::io::{Read, Write};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// Largest record size in bytes (64 KiB default; --quick: 8 KiB).
    #[arg(long)]
    pub max: Option<usize>,
    /// Records per size.
    #[arg(long, default_value_t = 1024)]
    pub records: usize,
    /// Read passes per size (the mean over all of them is reported).
    #[arg(long, default_value_t = 1)]
    pub read_passes: usize,
    /// Open with O_DIRECT, so every record is a request to the file system
    /// (through FUSE: no page cache, no readahead). Local file systems may
    /// refuse unaligned O_DIRECT; FUSE mounts accept it.
    #[arg(long)]
    pub direct: bool,
}

fn open(path: &std::path::Path, write: bool, direct: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    if write {
        o.write(true).create(true).truncate(true);
    } else {
        o.read(true);
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

pub fn run(a: &Args) -> anyhow::Result<String> {
    let c = &a.common;
    let max = a.max.unwrap_or(if c.quick { 8192 } else { 65536 });
    let dir = c.dir.join("imca-bench-b2");
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    let mut r = 1usize;
    while r <= max {
        let path = dir.join(format!("r{r}"));
        let rec = vec![0x5au8; r];
        let mut f = open(&path, true, a.direct)?;
        let t = Instant::now();
        for _ in 0..a.records {
            f.write_all(&rec)?;
        }
        let write_us = t.elapsed().as_secs_f64() * 1e6 / a.records as f64;
        drop(f);
        let mut read_us = 0.0;
        let mut buf = vec![0u8; r];
        for _ in 0..a.read_passes.max(1) {
            if c.cold {
                drop_caches()?;
            }
            let mut f = open(&path, false, a.direct)?;
            let t = Instant::now();
            for _ in 0..a.records {
                f.read_exact(&mut buf)?;
            }
            read_us += t.elapsed().as_secs_f64() * 1e6 / a.records as f64;
        }
        read_us /= a.read_passes.max(1) as f64;
        anyhow::ensure!(buf == rec, "read back different bytes at record size {r}");
        std::fs::remove_file(&path)?;
        rows.push(serde_json::json!({"record": r, "write_us": write_us, "read_us": read_us}));
        r *= 2;
    }
    if c.json {
        return Ok(serde_json::json!({
            "bench": "B2 latency", "label": c.label, "dir": c.dir, "records": a.records, "cold": c.cold,
            "direct": a.direct, "rows": rows,
        })
        .to_string());
    }
    let mut out = format!("B2 latency  {}  records={} cold={}\n  {:>8} {:>12} {:>12}\n", c.label, a.records, c.cold, "record", "write µs", "read µs");
    for row in &rows {
        out += &format!(
            "  {:>8} {:>12.1} {:>12.1}\n",
            row["record"].as_u64().unwrap_or(0),
            row["write_us"].as_f64().unwrap_or(0.0),
            row["read_us"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(out)
}
