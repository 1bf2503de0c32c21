//! # RDMA transport (InfiniBand / RoCE verbs through `rdma-sys`)
//!
//! The same [`RpcClient`](crate::RpcClient) / [`RpcService`](crate::RpcService)
//! boundary as TCP, over reliable-connected queue pairs, following the
//! dissertation's Read-Write design:
//!
//! ```text
//!  client                                             server
//!  ── Send [hdr | head | small bulk] ───────────────────>   small request: one Send
//!  ── Send [hdr: read region, reply regions | head] ────>   large request bulk:
//!  <══ RDMA Read of the client's read region ═══════════     the server pulls it
//!                                  service.handle(req)
//!  <══ RDMA Write into the client's reply region ═══════   large reply bulk
//!  <── Send [hdr | head] ─────────────────────────────────   then the reply Send
//! ```
//!
//! Servers never expose memory: their QPs grant no remote access and they
//! advertise nothing; only the client advertises buffers, one MR per
//! buffer, for the duration of one call.
//!
//! * **Connections** ([`connect`](client), [`serve`]): rdma_cm resolves
//!   addresses and routes and exchanges the handshake ([`proto::Hello`]: receive
//!   buffers, message size, inline threshold, active MTU) in the CM private
//!   data, so both sides agree before any traffic. We drive the QP states
//!   ourselves (GRH + GID index for RoCE, path MTU = smaller active MTU, ack
//!   timeout and retry counts from [`RdmaOptions`]).
//! * **Buffers** ([`pool`]): pre-registered slabs in size classes, RAII guards;
//!   a large application buffer is registered once and cached by ownership
//!   ([`mrcache`]) instead of being copied; below `copy_threshold` it is copied.
//! * **Flow control** ([`conn`]): credits = receive buffers − 1, piggybacked on
//!   every Send, explicit update at half; one credit reserved for updates.
//! * **Completions**: one CQ per connection on a completion channel whose fd
//!   tokio watches (`AsyncFd`); or busy polling (`busy_poll`) for latency.
//!
//! * **Bounds** (server): at most `max_connections` connections, at most
//!   `max_unauthenticated` of them still owing their proof (the oldest is
//!   closed for a newcomer; each has `connect_timeout` at most), and request
//!   bulks pulled by RDMA Read held against one `memory` budget.
//!
//! Task model: one driver task per connection (completions and CM events);
//! client calls run in the caller's task; the server handles each request in
//! its own task, at most `max_in_flight` at once per connection.

mod client;
mod cm;
mod conn;
mod device;
mod domain;
mod mrcache;
mod pool;
mod proto;
mod qp;
mod server;

pub use client::RdmaClient;
pub use device::device_present;
pub use pool::SIZE_CLASSES;
pub use proto::{Agreed, VERSION};
pub use server::{serve, RdmaListener, StatsHandle};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Knobs of one endpoint. The handshake takes the smaller of both sides'
/// sizes; credits come from the peer's `recv_count`.
#[derive(Clone, Debug)]
pub struct RdmaOptions {
    /// Receive buffers kept posted per connection (the peer gets `recv_count - 1` credits).
    pub recv_count: u16,
    /// Size of every receive buffer = the largest Send (header + head + inline bulk).
    pub msg_size: u32,
    /// A bulk up to this size travels inline in the Send instead of by RDMA.
    pub inline_threshold: u32,
    /// Application buffers below this are copied into a pool buffer; from it
    /// on they are registered (once, cached) and used in place. See
    /// docs/benchmarks/archive/rdma-vs-tcp.md for the measurement behind the default.
    pub copy_threshold: usize,
    /// Room a client offers for a reply head too large for a Send.
    pub max_reply_head: usize,
    /// QP local ACK timeout (4.096 µs · 2^n). Soft-RoCE in an emulated VM needs 18–20.
    pub ack_timeout: u8,
    /// Transport retries before a QP errors out (max 7).
    pub retry_cnt: u8,
    /// Receiver-not-ready retries. Credits make RNR impossible, so 0: a bug fails loudly.
    pub rnr_retry: u8,
    /// Pin the source GID index (RoCE v2 IPv4: the `::ffff:a.b.c.d` entry);
    /// `None` uses the one rdma_cm derives from the address.
    pub gid_index: Option<u8>,
    /// Poll the CQ in a loop (yielding to tokio) instead of sleeping on the
    /// completion channel: lower latency, one busy core per connection.
    pub busy_poll: bool,
    /// Server: requests of one connection handled at once (sizes the send queue).
    pub max_in_flight: usize,
    pub connect_timeout: Duration,
    /// A call that takes longer fails with `TransportError::Timeout`.
    pub call_timeout: Duration,
    /// Server shutdown: how long in-flight requests may take before connections are closed.
    pub drain_timeout: Duration,
    /// Bytes of application buffers a registration cache keeps registered.
    pub mr_cache_bytes: usize,
    /// The volume's handshake key: both ends prove they hold it before any
    /// request is served (`crate::auth`). `None`: `--insecure` (and the
    /// cache bank, whose nodes hold no volume secret).
    pub auth: Option<secret::Key>,
    /// Server: client networks allowed to connect (`--auth-allow`); empty: any.
    pub allow: Vec<crate::allow::Cidr>,
    /// Server: connections served at once; a request beyond is rejected ("busy").
    pub max_connections: usize,
    /// Server: connections still owing their proof at once; a newcomer
    /// closes the oldest of them (as TCP's handshake slots do).
    pub max_unauthenticated: usize,
    /// Server: bytes of request bulks pulled by RDMA Read and not yet
    /// handled, all connections together; a request waits for room.
    pub memory: usize,
    /// Tests only: send these bytes as the handshake instead of ours.
    #[doc(hidden)]
    pub hello_override: Option<Vec<u8>>,
}

impl Default for RdmaOptions {
    fn default() -> Self {
        RdmaOptions {
            recv_count: 32,
            msg_size: 8192,
            inline_threshold: 4096,
            copy_threshold: DEFAULT_COPY_THRESHOLD,
            max_reply_head: 64 << 10,
            ack_timeout: 14,
            retry_cnt: 6,
            rnr_retry: 0,
            gid_index: None,
            busy_poll: false,
            max_in_flight: 64,
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(5),
            mr_cache_bytes: 256 << 20,
            auth: None,
            allow: Vec::new(),
            max_connections: 1024,
            max_unauthenticated: 64,
            memory: 256 << 20,
            hello_override: None,
        }
    }
}

/// See [`RdmaOptions::copy_threshold`].
/// Measured with the `copy_vs_register` test in the soft-RoCE VM: one
/// `ibv_reg_mr` + `ibv_dereg_mr` costs about as much as copying 32-64 KiB and
/// grows far slower with size (4 KiB: copy 1.3 µs vs register 31 µs; 64 KiB:
/// 106 µs vs 48 µs; 4 MiB: 1.4 ms vs 0.64 ms). The VM's CPU is emulated, so
/// re-measure on real hardware; a registration-cache hit costs nothing.
pub const DEFAULT_COPY_THRESHOLD: usize = 64 << 10;

/// Counters of one client or one listener (all its connections).
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub sends: AtomicU64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub credit_updates: AtomicU64,
    pub credit_waits: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub rejected: AtomicU64,
    pub connections: AtomicU64,
}

/// A snapshot of [`Counters`]: what went over the wire, and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaStats {
    /// Sends posted (messages, incl. credit updates).
    pub sends: u64,
    /// RDMA Reads posted (server: large request bulks pulled).
    pub reads: u64,
    /// RDMA Writes posted (server: reply heads/bulks pushed).
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Explicit credit-update messages sent.
    pub credit_updates: u64,
    /// Sends that had to wait for a credit.
    pub credit_waits: u64,
    /// Invalid messages received (each closes its connection).
    pub protocol_errors: u64,
    /// Connection requests refused at the handshake.
    pub rejected: u64,
    /// Connections established.
    pub connections: u64,
    /// Registration-cache hits/misses of large application buffers.
    pub mr_cache_hits: u64,
    pub mr_cache_misses: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> RdmaStats {
        let g = |a: &AtomicU64| a.load(Relaxed);
        RdmaStats {
            sends: g(&self.sends),
            reads: g(&self.reads),
            writes: g(&self.writes),
            bytes_read: g(&self.bytes_read),
            bytes_written: g(&self.bytes_written),
            credit_updates: g(&self.credit_updates),
            credit_waits: g(&self.credit_waits),
            protocol_errors: g(&self.protocol_errors),
            rejected: g(&self.rejected),
            connections: g(&self.connections),
            mr_cache_hits: 0,
            mr_cache_misses: 0,
        }
    }
}

/// Cost of copying vs registering a buffer of `len` bytes on the first
/// device found, in nanoseconds (median of `rounds`): the measurement behind
/// `copy_threshold` (`cargo test --features rdma --test rdma -- copy_vs_register --nocapture`).
#[doc(hidden)]
pub fn measure_copy_vs_register(len: usize, rounds: usize) -> std::io::Result<(u64, u64)> {
    device::measure_copy_vs_register(len, rounds)
}
