//! Plain-text tables for `imca ctl`: aligned columns, no colours, so the
//! output reads the same in a terminal, a log and a ticket.

use admin::{FlushReport, NodeStatus, Status};
use std::fmt::Write;
use volume::CacheConfig;

/// Columns padded to their widest cell; the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let _ = write!(s, "{c:<width$}  ", width = w[i]);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn pct(r: Option<f64>) -> String {
    r.map(|r| format!("{:.1}%", r * 100.0)).unwrap_or_else(|| "-".into())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

pub fn config(c: &CacheConfig) -> String {
    let nodes = if c.nodes.is_empty() { "(none: cache off)".to_string() } else { c.nodes.join(", ") };
    let rows = vec![
        vec!["volume".into(), c.volume.clone()],
        vec!["epoch".into(), c.epoch.to_string()],
        vec!["block_size".into(), format!("{} ({})", c.block_size, bytes(c.block_size.into()))],
        vec!["placement".into(), format!("{:?}", c.placement).to_lowercase()],
        vec!["timeout_ms".into(), c.timeout_ms.to_string()],
        vec!["lease_ms".into(), c.lease_ms.to_string()],
        vec!["nodes".into(), nodes],
    ];
    table(&["OPTION", "VALUE"], &rows)
}

pub fn config_changed(c: &CacheConfig, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(c).unwrap_or_default());
    } else {
        println!(
            "ok: volume {} now at epoch {} (every gateway picks it up within {} ms)",
            c.volume, c.epoch, c.lease_ms
        );
        print!("{}", config(c));
    }
}

pub fn nodes(nodes: &[NodeStatus]) -> String {
    if nodes.is_empty() {
        return "no cache nodes: the cache is off (imca ctl cache-nodes add HOST:PORT)\n".into();
    }
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let health = match (n.healthy, n.fenced) {
                (_, true) => "FENCED",
                (true, false) => "up",
                (false, false) => "DOWN",
            };
            let mem = match (n.bytes, n.limit_bytes) {
                (Some(b), Some(l)) => format!("{} / {}", bytes(b), bytes(l)),
                (Some(b), None) => bytes(b),
                _ => "-".into(),
            };
            vec![
                n.addr.clone(),
                health.into(),
                n.hits.to_string(),
                n.misses.to_string(),
                pct(n.hit_ratio),
                opt(n.items),
                mem,
                opt(n.evictions),
                n.login.as_deref().map_or("-", |l| if l == "none" { "NONE" } else { l }).into(),
                n.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(&["CACHE NODE", "HEALTH", "HITS", "MISSES", "HIT%", "ITEMS", "MEMORY", "EVICTIONS", "LOGIN", "ERROR"], &rows)
}

pub fn status(s: &Status) -> String {
    let mut out = String::new();
    let c = &s.config;
    let _ = writeln!(
        out,
        "volume {}  epoch {}  block {}  placement {}  timeout {} ms  lease {} ms",
        s.volume,
        s.epoch,
        bytes(c.block_size.into()),
        format!("{:?}", c.placement).to_lowercase(),
        c.timeout_ms,
        c.lease_ms
    );
    if s.epoch != c.epoch {
        let _ = writeln!(out, "note: this gateway still uses epoch {}; the volume is at {}", s.epoch, c.epoch);
    }
    let g = &s.gateway;
    let _ = writeln!(
        out,
        "gateway {}  mount {}  up {} s  transport {}",
        g.version,
        g.mountpoint.as_deref().unwrap_or("-"),
        g.uptime_seconds,
        g.transport.as_deref().unwrap_or("-")
    );
    if g.open_cache_nodes_allowed {
        let _ = writeln!(
            out,
            "warning: cache nodes without a login are used (--cache-allow-open-nodes or no volume secret): \
             any local user can write the bank"
        );
    }
    let b = &s.bank_bypass;
    if let Some(t) = b.for_seconds {
        let _ = writeln!(out, "BANK BYPASSED for {t:.1} s (config lease ran out: the authority did not answer in time)");
    }
    if b.episodes > 0 {
        let _ = writeln!(out, "bank bypassed {} time(s) since start, {:.1} s in all", b.episodes, b.seconds_total);
    }
    let h = &s.heals;
    if h.pending > 0 || h.sweep_needed || h.given_up > 0 {
        let _ = writeln!(
            out,
            "heals: {} name(s) pending{}{}",
            h.pending,
            if h.sweep_needed { ", a full sweep waits for every server" } else { "" },
            if h.given_up > 0 { format!(", {} given up (run `imca heal`)", h.given_up) } else { String::new() }
        );
    }
    let _ = writeln!(out, "pipeline: {}\n", s.pipeline.join(" -> "));
    let rows: Vec<Vec<String>> = s
        .storage_servers
        .iter()
        .map(|v| {
            vec![
                v.addr.clone(),
                if v.healthy { "up".into() } else { "DOWN".into() },
                opt(v.epoch),
                v.latency_ms.map(|l| format!("{l:.2} ms")).unwrap_or_else(|| "-".into()),
                v.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out += &table(&["STORAGE SERVER", "HEALTH", "EPOCH", "RTT", "ERROR"], &rows);
    out.push('\n');
    out += &nodes(&s.cache_nodes);
    if !s.hit_ratio.is_empty() {
        out.push('\n');
        let rows: Vec<Vec<String>> = s
            .hit_ratio
            .iter()
            .map(|o| vec![o.op.clone(), o.hits.to_string(), o.misses.to_string(), pct(o.hit_ratio)])
            .collect();
        out += &table(&["OP", "HITS", "MISSES", "HIT%"], &rows);
    }
    out
}

pub fn flush(r: &FlushReport) -> String {
    let rows: Vec<Vec<String>> = r
        .nodes
        .iter()
        .map(|n| vec![n.addr.clone(), if n.ok { "flushed".into() } else { "FAILED".into() }, n.error.clone().unwrap_or_default()])
        .collect();
    table(&["CACHE NODE", "RESULT", "ERROR"], &rows)
}

pub fn options(v: &[serde_json::Value]) -> String {
    let s = |x: &serde_json::Value| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string());
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|o| {
            vec![
                s(&o["name"]),
                s(&o["type"]),
                s(&o["range"]),
                s(&o["default"]),
                if o["settable"] == true { "yes".into() } else { "no".into() },
                s(&o["description"]),
            ]
        })
        .collect();
    table(&["OPTION", "TYPE", "RANGE", "DEFAULT", "SETTABLE", "DESCRIPTION"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["long".into(), "x".into()], vec!["s".into(), "y".into()]]);
        assert_eq!(t, "A     BB\nlong  x\ns     y\n");
        assert_eq!(bytes(131072), "128 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(10), "10 B");
    }
}
