//! `stats`, `stats settings`, `stats items`, `stats slabs`, `stats conns` (a subset of
//! memcached's names with the same meanings; values are ours).

use std::sync::atomic::Ordering;

use cache_proto::text::reply;

use crate::config::VERSION;
use crate::node::Node;
use crate::stats::C;
use crate::store::ITEM_OVERHEAD;

type List = Vec<(String, String)>;

fn rusage() -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn general(n: &Node) -> List {
    let s = &n.stats;
    let mut l: List = Vec::with_capacity(64);
    let mut p = |k: &str, v: String| l.push((k.to_string(), v));
    let (u, sy) = rusage();
    p("pid", std::process::id().to_string());
    p("uptime", s.started.elapsed().as_secs().to_string());
    p("time", n.store.clock.unix_now().to_string());
    p("version", VERSION.to_string());
    p("imca_version", env!("CARGO_PKG_VERSION").to_string());
    p("pointer_size", (8 * std::mem::size_of::<usize>()).to_string());
    p("rusage_user", format!("{u:.6}"));
    p("rusage_system", format!("{sy:.6}"));
    p("max_connections", n.config.max_conns.to_string());
    p("curr_connections", s.curr_connections.load(Ordering::Relaxed).to_string());
    p("total_connections", s.total_connections.load(Ordering::Relaxed).to_string());
    p("rejected_connections", s.rejected_connections.load(Ordering::Relaxed).to_string());
    for c in C::ALL {
        if !c.name().starts_with("imca_") && c != C::BytesRead && c != C::BytesWritten {
            p(c.name(), s.get(c).to_string());
        }
    }
    p("bytes_read", s.get(C::BytesRead).to_string());
    p("bytes_written", s.get(C::BytesWritten).to_string());
    p("limit_maxbytes", n.store.limit().to_string());
    p("accepting_conns", "1".into());
    p("threads", n.config.threads.to_string());
    p("bytes", n.store.bytes().to_string());
    p("curr_items", n.store.items().to_string());
    p("total_items", n.store.total_items.load(Ordering::Relaxed).to_string());
    p("evictions", n.store.evictions.load(Ordering::Relaxed).to_string());
    l
}

fn settings(n: &Node) -> List {
    let c = &n.config;
    let (host, _) = c.listen.rsplit_once(':').unwrap_or((&c.listen, ""));
    vec![
        ("maxbytes".into(), n.store.limit().to_string()),
        ("maxconns".into(), c.max_conns.to_string()),
        ("tcpport".into(), n.port.load(Ordering::Relaxed).to_string()),
        ("udpport".into(), "0".into()),
        ("inter".into(), host.to_string()),
        ("verbosity".into(), c.verbose.to_string()),
        ("evictions".into(), if c.evictions { "on" } else { "off" }.into()),
        ("domain_socket".into(), c.unix_socket.as_ref().map_or_else(|| "NULL".into(), |p| p.display().to_string())),
        ("umask".into(), format!("{:o}", c.unix_mask)),
        ("num_threads".into(), c.threads.to_string()),
        ("cas_enabled".into(), "yes".into()),
        ("binding_protocol".into(), c.binding.text().into()),
        ("item_size_max".into(), c.item_max.to_string()),
        ("flush_enabled".into(), if c.flush_enabled { "yes" } else { "no" }.into()),
    ]
}

fn items(n: &Node) -> List {
    if n.store.items() == 0 {
        return vec![];
    }
    vec![
        ("items:1:number".into(), n.store.items().to_string()),
        ("items:1:age".into(), "0".into()),
        ("items:1:mem_requested".into(), n.store.bytes().to_string()),
        ("items:1:evicted".into(), n.store.evictions.load(Ordering::Relaxed).to_string()),
        ("items:1:outofmemory".into(), "0".into()),
    ]
}

fn slabs(n: &Node) -> List {
    let mut l: List = vec![];
    if n.store.items() > 0 {
        let s = &n.stats;
        l.push(("1:chunk_size".into(), ITEM_OVERHEAD.to_string()));
        l.push(("1:used_chunks".into(), n.store.items().to_string()));
        l.push(("1:get_hits".into(), s.get(C::GetHits).to_string()));
        l.push(("1:cmd_set".into(), s.get(C::CmdSet).to_string()));
        l.push(("1:delete_hits".into(), s.get(C::DeleteHits).to_string()));
        l.push(("1:incr_hits".into(), s.get(C::IncrHits).to_string()));
        l.push(("1:decr_hits".into(), s.get(C::DecrHits).to_string()));
        l.push(("1:cas_hits".into(), s.get(C::CasHits).to_string()));
        l.push(("1:cas_badval".into(), s.get(C::CasBadval).to_string()));
        l.push(("1:touch_hits".into(), s.get(C::TouchHits).to_string()));
    }
    l.push(("active_slabs".into(), if n.store.items() > 0 { "1" } else { "0" }.into()));
    l.push(("total_malloced".into(), n.store.bytes().to_string()));
    l
}

/// The stat list for `stats <args>`; `None` for an unknown group.
pub fn collect(n: &Node, args: &[&[u8]]) -> Option<List> {
    match args.first().copied() {
        None => Some(general(n)),
        Some(b"settings") => Some(settings(n)),
        Some(b"items") => Some(items(n)),
        Some(b"slabs") => Some(slabs(n)),
        Some(b"sizes") => Some(vec![("sizes_status".into(), "disabled".into())]),
        Some(b"conns") => Some(n.conns.stats(n.store.clock.now())),
        Some(b"reset") => {
            n.stats.reset();
            Some(vec![])
        }
        _ => None,
    }
}

/// Text-protocol `stats` reply.
pub fn stats(n: &Node, args: &[&[u8]], out: &mut Vec<u8>) {
    match args.first().copied() {
        Some(b"reset") => {
            n.stats.reset();
            reply::line(out, "RESET");
        }
        // per-prefix detail is not collected: on/off are accepted, a dump is empty
        Some(b"detail") => match args.get(1).copied() {
            Some(b"on" | b"off") => reply::line(out, "OK"),
            Some(b"dump") => reply::line(out, "END"),
            _ => reply::line(out, "CLIENT_ERROR usage: stats detail on|off|dump"),
        },
        _ => match collect(n, args) {
            Some(list) => {
                for (k, v) in list {
                    reply::stat(out, &k, v);
                }
                reply::line(out, "END");
            }
            None => reply::line(out, "ERROR"),
        },
    }
}
