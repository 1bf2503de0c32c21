//! Command-line flags (memcached's names and meanings) and the node config.

use std::path::PathBuf;
use std::sync::Arc;

use crate::auth::Users;
// the start-up failures and their exit statuses, where callers have found them
pub use crate::exit::{exit_status, OsErr, Usage};

pub const DEFAULT_PORT: u16 = 11211;
/// Loopback only unless told otherwise, as Debian's memcached.conf does
/// (`-l 127.0.0.1`): memcached's protocol has no authentication unless
/// `-Y` is given, so a node must be put on the cache network on purpose,
/// never by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1";
pub const DEFAULT_MEMORY_MB: usize = 64;
pub const DEFAULT_MAX_CONNS: usize = 1024;
pub const DEFAULT_THREADS: usize = 4;
pub const DEFAULT_ITEM_MAX: usize = 1 << 20;
/// With `-Y`: seconds a connection has to log in before it is closed. A
/// gateway logs in with its first bytes; an idle socket holds no slot past it.
pub const DEFAULT_LOGIN_TIMEOUT_SECS: u64 = 5;
/// With `-Y`: connections not yet logged in hold at most `-c` / this; over
/// it the oldest of the peer holding the most is closed (`admission.rs`).
pub const LOGIN_CONNS_SHARE: usize = 8;
/// With `-Y`, the shares above are never below this (or `-c` itself): a
/// client opening its pool in parallel must not shed its own connections.
pub const MIN_LOGIN_CONNS: usize = 16;
/// With `-Y`: one peer (a local uid, a remote IP) holds at most `-c` / this.
pub const PEER_CONNS_SHARE: usize = 2;

/// `imca cache-node` flags: memcached's, plus `--metrics` and `--ready-file`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// TCP port to listen on (0 = pick a free one)
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// interface to listen on: loopback only by default (like Debian's
    /// memcached.conf); give the cache network's address, or 0.0.0.0 for all
    #[arg(short = 'l', long = "listen", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// item memory in megabytes (keys, values and per-item overhead)
    #[arg(short = 'm', long = "memory-limit", default_value_t = DEFAULT_MEMORY_MB)]
    pub memory_mb: usize,
    /// max simultaneous connections
    #[arg(short = 'c', long = "conn-limit", default_value_t = DEFAULT_MAX_CONNS)]
    pub max_conns: usize,
    /// number of worker threads
    #[arg(short = 't', long = "threads", default_value_t = DEFAULT_THREADS)]
    pub threads: usize,
    /// max item size, with k/m suffix (default 1m)
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_size_unchecked)]
    pub item_max: usize,
    /// UDP port; only 0 (off) is supported
    #[arg(short = 'U', long = "udp-port", default_value_t = 0)]
    pub udp_port: u16,
    /// user to run as (accepted for compatibility; ignored unless root, and we never switch)
    #[arg(short = 'u', long = "user")]
    pub user: Option<String>,
    /// verbose (repeat for more)
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// serve Prometheus /metrics on this address (host:port)
    #[arg(long = "metrics")]
    pub metrics: Option<String>,
    /// write {"addr":..,"metrics":..} here once listening
    #[arg(long = "ready-file")]
    pub ready_file: Option<PathBuf>,
    /// also serve memcached over RDMA on ADDR (ip:port of an RDMA interface;
    /// needs the `rdma` build feature and a device)
    #[arg(long = "rdma", value_name = "ADDR")]
    pub rdma: Option<String>,
    /// tcp, rdma (also serve memcached over RDMA on the same ip:port, in
    /// rdma_cm's port space; needs the `rdma` build feature and a device) or
    /// auto (rdma when possible, logged). `--rdma ADDR` picks another address.
    #[arg(long, value_name = "KIND", default_value = "tcp")]
    pub transport: transport::select::TransportKind,
    /// return an error when memory is exhausted instead of evicting
    /// (`SERVER_ERROR out of memory storing object`, as memcached)
    #[arg(short = 'M', long = "disable-evictions")]
    pub disable_evictions: bool,
    /// enable the `shutdown` command (it then stops the node, as memcached's `-A`)
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// disable flush_all: it is then answered `CLIENT_ERROR flush_all not
    /// allowed` (counted in cmd_flush, as memcached does)
    #[arg(short = 'F', long = "disable-flush-all")]
    pub disable_flush_all: bool,
    /// memcached's ASCII authentication: FILE holds `user:password` lines,
    /// and every connection must log in first (see `auth.rs`); the binary
    /// protocol is then refused, as memcached does
    #[arg(short = 'Y', long = "auth-file", value_name = "FILE")]
    pub auth_file: Option<PathBuf>,
    /// SASL for the binary protocol: binary clients log in with SASL PLAIN,
    /// checked against the -Y file (which it needs), and text clients with
    /// the -Y login line
    #[arg(short = 'S', long = "enable-sasl")]
    pub sasl: bool,
    /// with -Y: close a connection that has not logged in within this many seconds
    #[arg(long = "login-timeout", value_name = "SECS", default_value_t = DEFAULT_LOGIN_TIMEOUT_SECS)]
    pub login_timeout: u64,
    /// with -Y: connections not yet logged in held at once (default: -c/8, at
    /// least 16); a new one closes the oldest of the peer holding the most
    #[arg(long = "login-conn-limit", value_name = "N")]
    pub login_conns: Option<usize>,
    /// connections one peer (a local user by uid, a remote host by IP) may
    /// hold (default: -c/2 with -Y; without -Y no such limit, as memcached)
    #[arg(long = "peer-conn-limit", value_name = "N")]
    pub peer_conns: Option<usize>,
    /// UNIX socket to listen on, instead of TCP (as memcached: `-s`
    /// disables network support); a stale socket file left by a dead node
    /// is replaced, a live node's is not
    #[arg(short = 's', long = "unix-socket", value_name = "FILE")]
    pub unix_socket: Option<PathBuf>,
    /// access mask for the UNIX socket, in octal, like chmod (default: 700)
    #[arg(short = 'a', long = "unix-mask", value_name = "MASK", default_value = "700")]
    pub unix_mask: String,
    /// protocol for the listener: auto (negotiated per connection by the
    /// first byte), ascii (text and meta only) or binary
    #[arg(short = 'B', long = "protocol", value_name = "PROTO")]
    pub protocol: Option<String>,
    /// memcached's other flags (`compat.rs`: applied, without effect, or refused)
    #[command(flatten)]
    pub extra: crate::compat::Extra,
}

/// `-B`: which protocols a connection may speak (memcached's
/// `binding_protocol`). `Ascii` takes every byte as text (a binary request
/// waits for a newline like any other line), `Binary` closes a connection
/// whose request lacks the binary magic byte, as memcached does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Auto,
    Ascii,
    Binary,
}

impl Binding {
    /// memcached's `-B` values and errors.
    pub fn parse(s: &str) -> Result<Binding, Usage> {
        match s {
            "auto" => Ok(Binding::Auto),
            "ascii" => Ok(Binding::Ascii),
            "binary" => Ok(Binding::Binary),
            _ => Err(Usage(format!("Invalid value for binding protocol: {s}\n -- should be one of auto, binary, or ascii"))),
        }
    }

    /// As `stats settings` names it.
    pub fn text(self) -> &'static str {
        match self {
            Binding::Auto => "auto-negotiate",
            Binding::Ascii => "ascii",
            Binding::Binary => "binary",
        }
    }
}

/// `-a`: octal digits, as memcached reads them. memcached takes anything
/// (`strtol`, so `-a abc` is mask 0: a socket no one may use); a mask that
/// is not octal is refused here instead.
fn parse_mask(s: &str) -> Result<u32, Usage> {
    let t = s.trim();
    let ok = !t.is_empty() && t.len() <= 6 && t.bytes().all(|b| (b'0'..=b'7').contains(&b));
    let bad = || Usage(format!("-a {s:?}: the UNIX socket access mask must be octal digits, like chmod's (e.g. 700, 0770)"));
    if !ok {
        return Err(bad());
    }
    u32::from_str_radix(t, 8).map_err(|_| bad())
}

/// `-I`'s number without the range check (done with memcached's message
/// and exit status in `Config::try_from`).
fn parse_size_unchecked(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = match t.as_bytes().last() {
        Some(b'k' | b'K') => (&t[..t.len() - 1], 1024usize),
        Some(b'm' | b'M') => (&t[..t.len() - 1], 1024 * 1024),
        Some(b'g' | b'G') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("bad size {s:?} (bytes, or a number with a k or m suffix, e.g. 2m)"))?;
    n.checked_mul(mul).ok_or_else(|| format!("size {s:?} is too large"))
}

/// Everything `run` needs; build it from [`Args`] or by hand in tests.
#[derive(Debug, Clone)]
pub struct Config {
    /// host:port to bind (port 0 = any free port)
    pub listen: String,
    pub memory_bytes: usize,
    pub max_conns: usize,
    pub threads: usize,
    pub item_max: usize,
    pub metrics: Option<String>,
    pub ready_file: Option<PathBuf>,
    pub verbose: u8,
    /// serve memcached over RDMA here too (see `rdma.rs`)
    pub rdma: Option<String>,
    /// serve memcached over RDMA on the bound TCP address too (`--transport
    /// rdma`), unless `rdma` names another address
    pub rdma_on_listen: bool,
    /// `-Y`: the logins accepted; `None` = no authentication
    pub auth: Option<Arc<Users>>,
    /// `-S`: binary connections log in with SASL PLAIN (against `auth`)
    pub sasl: bool,
    /// with `-Y`: how long a connection has to log in
    pub login_timeout: std::time::Duration,
    /// with `-Y`: connections not yet logged in held at once (`None`: -c / [`LOGIN_CONNS_SHARE`])
    pub login_conns: Option<usize>,
    /// connections of one peer (`None`: -c / [`PEER_CONNS_SHARE`] with `-Y`, else no limit)
    pub peer_conns: Option<usize>,
    /// `-F`: flush_all refused
    pub flush_enabled: bool,
    /// `-M` turns them off: a store that does not fit is refused
    pub evictions: bool,
    /// `-A`: the `shutdown` command stops the node
    pub shutdown_enabled: bool,
    /// `-s`: listen on this UNIX socket instead of TCP (`listen` is unused)
    pub unix_socket: Option<PathBuf>,
    /// `-a`: the socket file's permission bits (memcached applies `& 0777`)
    pub unix_mask: u32,
    /// `-B`
    pub binding: Binding,
    /// `-n` and `-f`: the slab classes items are charged by (`slabs.rs`)
    pub slab_min: usize,
    pub slab_factor: f64,
    /// the LRU maintainer thread (`store/maintainer.rs`); `-o no_lru_maintainer`
    /// (or `no_modern`) turns it off, as in memcached
    pub lru_maintainer: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: format!("{DEFAULT_LISTEN}:{DEFAULT_PORT}"),
            memory_bytes: DEFAULT_MEMORY_MB << 20,
            max_conns: DEFAULT_MAX_CONNS,
            threads: DEFAULT_THREADS,
            item_max: DEFAULT_ITEM_MAX,
            metrics: None,
            ready_file: None,
            verbose: 0,
            rdma: None,
            rdma_on_listen: false,
            auth: None,
            sasl: false,
            login_timeout: std::time::Duration::from_secs(DEFAULT_LOGIN_TIMEOUT_SECS),
            login_conns: None,
            peer_conns: None,
            flush_enabled: true,
            evictions: true,
            shutdown_enabled: false,
            unix_socket: None,
            unix_mask: 0o700,
            binding: Binding::Auto,
            slab_min: 48,
            slab_factor: 1.25,
            lru_maintainer: true,
        }
    }
}

impl Config {
    /// A node on 127.0.0.1 with a free port, for tests.
    pub fn local() -> Config {
        Config { listen: "127.0.0.1:0".into(), ..Config::default() }
    }

    /// The connection caps the acceptor keeps (`admission.rs`): without
    /// `-Y`, memcached's `-c` (and a per-peer cap only if asked for); with
    /// it, also a per-peer cap and a cap on connections not yet logged in.
    pub fn crowd_limits(&self) -> daemon::CrowdLimits {
        let c = self.max_conns.max(1);
        let login = self.auth.is_some();
        // a small -c keeps room for a client's burst of parallel connects
        let by_default = |share: usize| if login { (c / share).max(c.min(MIN_LOGIN_CONNS)) } else { c };
        daemon::CrowdLimits {
            max: c,
            per_peer: self.peer_conns.unwrap_or_else(|| by_default(PEER_CONNS_SHARE)).clamp(1, c),
            max_unsettled: if login { self.login_conns.unwrap_or_else(|| by_default(LOGIN_CONNS_SHARE)).clamp(1, c) } else { c },
        }
    }

    /// The largest value accepted: the item limit minus memcached's item
    /// header, CAS and the "\r\n" it stores with the value.
    pub fn max_value(&self) -> usize {
        self.item_max.saturating_sub(48 + 8 + 2 + 1)
    }
}

impl TryFrom<&Args> for Config {
    type Error = anyhow::Error;
    fn try_from(a: &Args) -> anyhow::Result<Config> {
        if a.udp_port != 0 {
            tracing::warn!("UDP is not supported; -U {} ignored", a.udp_port);
        }
        anyhow::ensure!(a.threads > 0, "Number of threads must be greater than 0");
        anyhow::ensure!(a.max_conns > 0, "Maximum connections must be greater than 0");
        // memcached's -I rules, messages and exit status
        if a.item_max < 1024 {
            return Err(Usage("Item max size cannot be less than 1024 bytes.".into()).into());
        }
        if a.item_max > 1 << 30 {
            return Err(Usage("Cannot set item size limit higher than 1 gigabyte.".into()).into());
        }
        if a.item_max > (a.memory_mb.max(1) << 20) / 2 {
            return Err(Usage("Cannot set item size limit higher than 1/2 of memory max.".into()).into());
        }
        let unix_mask = parse_mask(&a.unix_mask)?;
        let mut binding = a.protocol.as_deref().map(Binding::parse).transpose()?;
        if a.sasl && a.auth_file.is_none() {
            // memcached checks SASL logins against Cyrus SASL's database; we against -Y's lines
            return Err(Usage("-S needs -Y FILE: SASL PLAIN logins are checked against its user:password lines".into()).into());
        }
        if a.auth_file.is_some() && !a.sasl {
            // memcached: ASCII authentication binds the listener to ascii
            if binding.is_some_and(|b| b != Binding::Ascii) {
                return Err(Usage("ERROR: You cannot allow the BINARY protocol while using ascii authentication tokens.".into()).into());
            }
            binding = Some(Binding::Ascii);
        }
        if a.unix_socket.is_some() && matches!(a.transport, transport::select::TransportKind::Rdma) && a.rdma.is_none() {
            return Err(Usage("--transport rdma serves RDMA on the TCP address, and -s disables network support: give --rdma ADDR".into()).into());
        }
        let rdma_on_listen =
            transport::select::use_rdma(a.transport, "cache node").map_err(anyhow::Error::msg)? && a.rdma.is_none() && a.unix_socket.is_none();
        let host = if a.listen.contains(':') && !a.listen.starts_with('[') { format!("[{}]", a.listen) } else { a.listen.clone() };
        Ok(Config {
            listen: format!("{host}:{}", a.port),
            memory_bytes: a.memory_mb.max(1) << 20,
            max_conns: a.max_conns,
            threads: a.threads,
            item_max: a.item_max,
            metrics: a.metrics.clone(),
            ready_file: a.ready_file.clone(),
            verbose: a.verbose,
            rdma: a.rdma.clone(),
            rdma_on_listen,
            auth: a.auth_file.as_deref().map(Users::load).transpose()?.map(Arc::new),
            sasl: a.sasl,
            login_timeout: std::time::Duration::from_secs(a.login_timeout.max(1)),
            login_conns: a.login_conns,
            peer_conns: a.peer_conns,
            flush_enabled: !a.disable_flush_all,
            evictions: !a.disable_evictions,
            shutdown_enabled: a.enable_shutdown,
            unix_socket: a.unix_socket.clone(),
            unix_mask,
            binding: binding.unwrap_or(Binding::Auto),
            // validated by compat.rs (> 0, > 1)
            slab_min: a.extra.min_size.map_or(48, |n| n.max(1) as usize),
            slab_factor: a.extra.factor.unwrap_or(1.25),
            lru_maintainer: crate::compat::lru_maintainer(&a.extra.extended),
        })
    }
}
