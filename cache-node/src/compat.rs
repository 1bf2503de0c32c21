//! memcached's command-line flags that have no machinery of their own
//! here: what each does in `imca cache-node` — applied (`-r`, `-k`, `-P`,
//! `-o lru_maintainer`/`no_lru_maintainer`), validated like memcached and
//! then without effect (`-L`, `-R`, `-b`, `-o` options of memcached's
//! internals), or refused with a message that says why (`-d`, `-e`, `-C`,
//! `ext_*`). Runs before the node
//! starts; `imca cache-node -h` lists the flags.

use crate::exit::Usage;
use std::path::PathBuf;

/// What memcached reports as its version (clients parse it); ours is appended in `stats`.
pub const VERSION: &str = "1.6.18";

/// The memcached flags `Args` flattens in (names and meanings as memcached's).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Extra {
    /// maximize the core file size limit (applied)
    #[arg(short = 'r', long = "enable-coredumps")]
    pub coredumps: bool,
    /// lock down all paged memory (mlockall; a failure is a warning, as in memcached)
    #[arg(short = 'k', long = "lock-memory")]
    pub lock_memory: bool,
    /// save the process id in FILE
    #[arg(short = 'P', long = "pidfile", value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// chunk size growth factor of the slab classes items are charged by
    #[arg(short = 'f', long = "slab-growth-factor", value_name = "FACTOR")]
    pub factor: Option<f64>,
    /// minimum space allocated for key+value+flags (the first slab class)
    #[arg(short = 'n', long = "slab-min-size", value_name = "BYTES")]
    pub min_size: Option<i64>,
    /// try to use large memory pages (no effect here)
    #[arg(short = 'L', long = "enable-largepages")]
    pub large_pages: bool,
    /// stats prefix delimiter (no effect: `stats detail` is not built)
    #[arg(short = 'D', value_name = "CHAR")]
    pub delimiter: Option<String>,
    /// maximum requests per event (validated, no effect here)
    #[arg(short = 'R', long = "max-reqs-per-event", value_name = "N")]
    pub reqs_per_event: Option<i64>,
    /// listen backlog (no effect: the OS default is used)
    #[arg(short = 'b', long = "listen-backlog", value_name = "N")]
    pub backlog: Option<i64>,
    /// comma-separated extended options (see `-o help` in memcached)
    #[arg(short = 'o', long = "extended", value_name = "OPTIONS", value_delimiter = ',')]
    pub extended: Vec<String>,
    /// refused: daemonize (run under a service manager instead)
    #[arg(short = 'd', long = "daemon")]
    pub daemon: bool,
    /// refused: memory file (extstore is not built)
    #[arg(short = 'e', long = "memory-file", value_name = "FILE")]
    pub memory_file: Option<String>,
    /// refused: disable CAS (the bank depends on it)
    #[arg(short = 'C', long = "disable-cas")]
    pub disable_cas: bool,
    /// print memcached's license and exit
    #[arg(short = 'i', long = "license")]
    pub license: bool,
    /// print the version and exit
    #[arg(short = 'V', long = "version")]
    pub version: bool,
}

/// `-o` options applied here (read by `Config`: [`lru_maintainer`]).
const APPLIED: &[&str] = &["lru_maintainer", "no_lru_maintainer"];

/// `-o` options memcached 1.6.18 takes that change nothing here (no slabs,
/// no LRU segments, no crawler, no log watchers), with or without a value.
/// (`no_modern` also stops the LRU maintainer, as in memcached; its other
/// settings have no effect here.)
const WITHOUT_EFFECT: &[&str] = &[
    "maxconns_fast", "no_maxconns_fast", "tail_repair_time", "hash_algorithm", "lru_crawler", "no_lru_crawler",
    "lru_crawler_sleep", "lru_crawler_tocrawl", "read_buf_mem_limit", "hot_lru_pct", "warm_lru_pct", "hot_max_factor", "warm_max_factor", "temporary_ttl", "idle_timeout",
    "slab_chunk_max", "watcher_logbuf_size", "worker_logbuf_size", "track_sizes", "no_hashexpand", "modern",
    "no_modern", "sock_cookie_id", "slab_reassign", "no_slab_reassign", "slab_automove", "slab_automove_ratio",
    "slab_automove_window", "drop_privileges", "no_drop_privileges", "inline_ascii_resp", "no_inline_ascii_resp",
    "hashpower",
];

/// Whether the LRU maintainer thread runs, from the `-o` options in
/// order: the last of `lru_maintainer` (on), `no_lru_maintainer` and
/// `no_modern` (off) wins, as in memcached 1.6.18 (`modern` changes nothing).
pub fn lru_maintainer(extended: &[String]) -> bool {
    extended.iter().map(|o| o.trim().split_once('=').map_or(o.trim(), |(n, _)| n)).fold(true, |on, name| match name {
        "lru_maintainer" => true,
        "no_lru_maintainer" | "no_modern" => false,
        _ => on,
    })
}

/// What to do before starting: `Exit` for `-i`/`-V` (printed already).
pub enum Verdict {
    Start,
    Exit,
}

/// Apply, validate or refuse the flags of [`Extra`], as memcached would.
pub fn apply(x: &Extra) -> anyhow::Result<Verdict> {
    if x.version {
        println!("memcached {} (imca cache-node {})", VERSION, env!("CARGO_PKG_VERSION"));
        return Ok(Verdict::Exit);
    }
    if x.license {
        println!("imca cache-node is licensed under the Apache License 2.0; it is not memcached (BSD), but speaks its protocols.");
        return Ok(Verdict::Exit);
    }
    let refuse = |flag: &str, why: &str| Err(Usage(format!("{flag} is not supported by imca cache-node: {why}")).into());
    if x.daemon {
        return refuse("-d", "it does not daemonize; run it under a service manager (deploy/imca-cache-node@.service)");
    }
    if x.memory_file.is_some() {
        return refuse("-e", "extstore and memory files are not built");
    }
    if x.disable_cas {
        return refuse("-C", "CAS is always on (the cache bank's coherence depends on it)");
    }
    // memcached's checks (its messages; it exits with status 1 on these)
    if x.factor.is_some_and(|f| f <= 1.0) {
        anyhow::bail!("Factor must be greater than 1");
    }
    if x.min_size.is_some_and(|n| n <= 0) {
        anyhow::bail!("Chunk size must be greater than 0");
    }
    if x.reqs_per_event.is_some_and(|n| n <= 0) {
        anyhow::bail!("Number of requests per event must be greater than 0");
    }
    let mut idle = Vec::new();
    for opt in x.extended.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
        let (name, value) = opt.split_once('=').map_or((opt, None), |(n, v)| (n, Some(v)));
        if name.starts_with("ext_") {
            anyhow::bail!("-o {name}: extstore is not built into imca cache-node");
        }
        if name == "hashpower" {
            let n: i64 = value.and_then(|v| v.parse().ok()).unwrap_or(0);
            anyhow::ensure!(n >= 12, "Initial hashtable multiplier of {n} is too low");
            anyhow::ensure!(
                n <= 64,
                "Initial hashtable multiplier of {n} is too high\nChoose a value based on \"STAT hash_power_level\" from a running instance"
            );
        }
        if APPLIED.contains(&name) {
            continue;
        }
        if !WITHOUT_EFFECT.contains(&name) {
            anyhow::bail!("Illegal suboption \"{name}\"");
        }
        idle.push(name.to_string());
    }
    for (set, flag) in [(x.large_pages, "-L"), (x.delimiter.is_some(), "-D"), (x.reqs_per_event.is_some(), "-R"), (x.backlog.is_some(), "-b")] {
        if set {
            idle.push(flag.to_string());
        }
    }
    if !idle.is_empty() {
        tracing::info!("accepted without effect here (memcached internals this node does not have): {}", idle.join(", "));
    }
    if x.coredumps {
        let max = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        // SAFETY: a plain syscall on a valid struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &max) } != 0 {
            anyhow::bail!("failed to ensure corefile creation: {}", std::io::Error::last_os_error());
        }
    }
    if x.lock_memory {
        // SAFETY: no preconditions.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            tracing::warn!("warning: -k invalid, mlockall() failed: {}", std::io::Error::last_os_error());
        }
    }
    if let Some(p) = &x.pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| anyhow::anyhow!("Could not open the pid file {} for writing: {e}", p.display()))?;
    }
    Ok(Verdict::Start)
}
