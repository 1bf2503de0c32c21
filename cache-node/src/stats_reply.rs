//! `stats`, `stats settings`, `stats items`, `stats slabs`, `stats conns` (a subset of
//! memcached's names with the same meanings; values are ours; `items` and
//! `slabs` per slab class as the store charges them, `slabs.rs`).

use std::sync::atomic::Ordering;

use cache_proto::text::reply;

use crate::compat::VERSION;
use crate::node::Node;
use crate::stats::C;
use crate::slabs::PAGE;

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
    if n.config.auth.is_some() {
        // ours, with -Y only: connections closed before logging in
        // (`admission.rs`), to make room or past --login-timeout
        p("login_shed_connections", n.crowd.counts.shed.load(Ordering::Relaxed).to_string());
        p("login_timeouts", n.crowd.counts.reaped.load(Ordering::Relaxed).to_string());
    }
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
    // memcached shows the maintainer's counters only when it runs
    let maintained = n.store.maintained();
    if maintained {
        p("lru_maintainer_juggles", n.store.lru.juggles.load(Ordering::Relaxed).to_string());
    }
    p("bytes", n.store.bytes().to_string());
    p("curr_items", n.store.items().to_string());
    p("total_items", n.store.hot.total_items.load(Ordering::Relaxed).to_string());
    if maintained {
        p("evicted_active", n.store.lru.evicted_active.load(Ordering::Relaxed).to_string());
    }
    p("evictions", n.store.hot.evictions.load(Ordering::Relaxed).to_string());
    if maintained {
        p("moves_within_lru", n.store.lru.moves_within_lru.load(Ordering::Relaxed).to_string());
        p("direct_reclaims", n.store.lru.direct_reclaims.load(Ordering::Relaxed).to_string());
    }
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
        ("growth_factor".into(), format!("{:.2}", c.slab_factor)),
        ("chunk_size".into(), c.slab_min.to_string()),
        ("slab_chunk_max".into(), crate::slabs::CHUNK_MAX.to_string()),
        ("flush_enabled".into(), if c.flush_enabled { "yes" } else { "no" }.into()),
        // memcached turns both off with `-o no_lru_maintainer`; the
        // maintainer's sweeps stand for its segments here (`store/maintainer.rs`)
        ("lru_maintainer_thread".into(), yes_no(n.store.maintained())),
        ("lru_segmented".into(), yes_no(n.store.maintained())),
    ]
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The slab classes that hold items: (id, items, chunks in use).
fn active_classes(n: &Node) -> Vec<(usize, usize, usize)> {
    let st = &n.store;
    (1..=st.classes.count())
        .map(|id| {
            let c = &st.per_class[id - 1];
            (id, c.items.load(Ordering::Relaxed), c.chunks.load(Ordering::Relaxed))
        })
        .filter(|&(_, items, _)| items > 0)
        .collect()
}

/// memcached's `stats items`, per slab class. Items are not split into
/// hot/warm/cold segments here: all count as cold (where eviction looks).
fn items(n: &Node) -> List {
    let mut l: List = vec![];
    for (id, number, _) in active_classes(n) {
        let c = &n.store.per_class[id - 1];
        let mut p = |k: &str, v: String| l.push((format!("items:{id}:{k}"), v));
        p("number", number.to_string());
        p("number_hot", "0".into());
        p("number_warm", "0".into());
        p("number_cold", number.to_string());
        p("age_hot", "0".into());
        p("age_warm", "0".into());
        p("age", "0".into());
        p("mem_requested", c.requested.load(Ordering::Relaxed).to_string());
        p("evicted", c.evicted.load(Ordering::Relaxed).to_string());
        for k in [
            "evicted_nonzero", "evicted_time", "outofmemory", "tailrepairs", "reclaimed", "expired_unfetched",
            "evicted_unfetched", "evicted_active", "crawler_reclaimed", "crawler_items_checked", "lrutail_reflocked",
            "moves_to_cold", "moves_to_warm", "moves_within_lru", "direct_reclaims", "hits_to_hot", "hits_to_warm",
            "hits_to_cold", "hits_to_temp",
        ] {
            p(k, "0".into());
        }
    }
    l
}

/// memcached's `stats slabs`: the pages a class would need for its chunks
/// (memcached keeps pages it once took; here they follow the items).
/// Command counts are not kept per class: they are shown under the class
/// when only one class holds items, as 0 otherwise.
fn slabs(n: &Node) -> List {
    let mut l: List = vec![];
    let active = active_classes(n);
    let mut pages_total = 0;
    for &(id, _, chunks) in &active {
        let cl = &n.store.classes;
        let per_page = cl.per_page(id);
        let pages = chunks.div_ceil(per_page);
        pages_total += pages;
        let mut p = |k: &str, v: String| l.push((format!("{id}:{k}"), v));
        p("chunk_size", cl.chunk(id).to_string());
        p("chunks_per_page", per_page.to_string());
        p("total_pages", pages.to_string());
        p("total_chunks", (pages * per_page).to_string());
        p("used_chunks", chunks.to_string());
        p("free_chunks", (pages * per_page - chunks).to_string());
        p("free_chunks_end", "0".into());
        let s = &n.stats;
        for (k, c) in [
            ("get_hits", C::GetHits),
            ("cmd_set", C::CmdSet),
            ("delete_hits", C::DeleteHits),
            ("incr_hits", C::IncrHits),
            ("decr_hits", C::DecrHits),
            ("cas_hits", C::CasHits),
            ("cas_badval", C::CasBadval),
            ("touch_hits", C::TouchHits),
        ] {
            p(k, if active.len() == 1 { s.get(c) } else { 0 }.to_string());
        }
    }
    l.push(("active_slabs".into(), active.len().to_string()));
    l.push(("total_malloced".into(), (pages_total * PAGE).to_string()));
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
