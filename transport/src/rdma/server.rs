//! The server end: an rdma_cm listener; each connection request is checked
//! (handshake), accepted on its own event channel, and served by its own
//! driver task, each request in its own task.

use super::cm::{peer_addr, resolve, CmEvent, CmId, EventChannel, RawAddr};
use super::conn::{Conn, Holder, OnRequest, PendingAuth, Role};
use super::device::check;
use super::domain::Domain;
use super::proto::{self, Header, Hello, Region, HEADER_LEN, MAX_PART};
use super::{Counters, RdmaOptions, RdmaStats};
use crate::{Message, RpcService, TransportError};
use bytes::Bytes;
use rdma_sys::*;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// A bound, listening rdma_cm id.
pub struct RdmaListener {
    // drop order: the id before its channel
    _id: CmId,
    ch: EventChannel,
    addr: SocketAddr,
    stats: Arc<Counters>,
}

impl RdmaListener {
    /// Listen on `addr` ("ip:port"; port 0 picks a free one). The IP must
    /// belong to an RDMA-capable interface (or be 0.0.0.0 for all of them).
    pub async fn bind(addr: &str) -> io::Result<RdmaListener> {
        let mut sa = resolve(addr).await?;
        let ch = EventChannel::new()?;
        let id = CmId::new(&ch)?;
        check(unsafe { rdma_bind_addr(id.0, RawAddr::new(sa).as_mut_ptr()) }, &format!("rdma_bind_addr({sa})"))?;
        check(unsafe { rdma_listen(id.0, 128) }, "rdma_listen")?;
        sa.set_port(id.local_port());
        Ok(RdmaListener { _id: id, ch, addr: sa, stats: Arc::default() })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that reads this listener's counters (also after `serve` took it).
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle(self.stats.clone())
    }
}

/// Reads the counters of a listener's connections.
#[derive(Clone)]
pub struct StatsHandle(Arc<Counters>);

impl StatsHandle {
    pub fn get(&self) -> RdmaStats {
        self.0.snapshot()
    }
}

/// Serve `service` until `shutdown` completes; then stop accepting, give
/// in-flight requests up to `opts.drain_timeout`, and close every connection.
pub async fn serve(
    listener: RdmaListener,
    service: Arc<dyn RpcService>,
    opts: RdmaOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    // Pulled request bulks are held against one budget, in 4 KiB units.
    let memory = Arc::new(Semaphore::new((opts.memory / UNIT).clamp(MAX_PART as usize / UNIT, Semaphore::MAX_PERMITS)));
    let on_request: OnRequest = Arc::new(move |conn: &Arc<Conn>, h: Header, inline: Bytes| {
        tokio::spawn(handle(conn.clone(), service.clone(), memory.clone(), h, inline));
    });
    let mut conns: Vec<Weak<Conn>> = Vec::new();
    tokio::pin!(shutdown);
    loop {
        let ev = tokio::select! {
            _ = &mut shutdown => break,
            ev = listener.ch.next() => ev?,
        };
        if ev.kind() != rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST {
            tracing::debug!("RDMA listener: ignoring {}", ev.name());
            continue;
        }
        conns.retain(|w| w.upgrade().is_some_and(|c| !c.is_dead()));
        let live: Vec<Arc<Conn>> = conns.iter().filter_map(Weak::upgrade).collect();
        let busy = live.len() >= opts.max_connections.max(1);
        let pending: Vec<&Arc<Conn>> = live.iter().filter(|c| c.awaits_auth()).collect();
        if !busy && pending.len() >= opts.max_unauthenticated.max(1) {
            // Unproven peers cannot crowd out gateways: the oldest goes.
            pending[0].close("evicted while unauthenticated: too many peers owe their proof");
        }
        drop(live);
        match accept(ev, &opts, &listener.stats, busy) {
            Ok(c) => {
                conns.push(Arc::downgrade(&c));
                if c.awaits_auth() {
                    // A peer that never proves the key holds its QP only this long.
                    let (w, t) = (Arc::downgrade(&c), c.opts.connect_timeout);
                    tokio::spawn(async move {
                        tokio::time::sleep(t).await;
                        if let Some(c) = w.upgrade().filter(|c| c.awaits_auth()) {
                            tracing::warn!(peer = %c.peer, "RDMA peer did not authenticate within {t:?}; closing");
                            c.close("no authentication");
                        }
                    });
                }
                tokio::spawn(c.drive(Role::Server(on_request.clone())));
            }
            Err(e) => tracing::warn!(listener = %listener.addr, "RDMA connection refused: {e}"),
        }
    }
    let deadline = Instant::now() + opts.drain_timeout;
    let live: Vec<Arc<Conn>> = conns.iter().filter_map(Weak::upgrade).collect();
    for c in &live {
        let all = c.opts.max_in_flight.max(1);
        while c.handlers.available_permits() < all && !c.is_dead() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        c.close("server shutting down");
    }
    Ok(())
}

fn accept(ev: CmEvent, opts: &RdmaOptions, stats: &Arc<Counters>, busy: bool) -> io::Result<Arc<Conn>> {
    let child = CmId(ev.id());
    let pd = ev.private_data();
    drop(ev); // acknowledged: required before the id can migrate
    let peer = peer_addr(&child);
    let allowed = opts.allow.is_empty()
        || peer.rsplit_once(':').and_then(|(h, _)| h.trim_matches(['[', ']']).parse().ok()).is_some_and(|ip| crate::allow::allows(&opts.allow, ip));
    let decoded = Hello::decode(&pd).and_then(|h| match &opts.auth {
        _ if !allowed => Err("the address is not in --auth-allow".to_string()),
        _ if busy => Err(format!("server busy: all {} connections taken", opts.max_connections)),
        Some(_) if h.flags & proto::HF_AUTH == 0 || pd.len() < proto::REQ_LEN => Err(
            "client offered no volume credentials (a gateway without --secret-file, or not one of ours)".to_string(),
        ),
        _ => Ok(h),
    });
    let remote = match decoded {
        Ok(h) => h,
        Err(why) => {
            stats.rejected.fetch_add(1, Relaxed);
            let mut msg = why.clone().into_bytes();
            msg.truncate(140);
            unsafe { rdma_reject(child.0, msg.as_ptr() as *const _, msg.len() as u8) };
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{peer}: {why}")));
        }
    };
    let ch = EventChannel::new()?;
    check(unsafe { rdma_migrate_id(child.0, ch.ch) }, "rdma_migrate_id")?;
    let dom = Domain::for_verbs(child.verbs(), opts.mr_cache_bytes)?;
    let port = dom.dev.query_port(child.port_num())?;
    let local = Hello {
        recv_count: opts.recv_count,
        msg_size: opts.msg_size,
        inline_threshold: opts.inline_threshold,
        active_mtu: port.active_mtu as u8,
        flags: if opts.auth.is_some() { proto::HF_AUTH } else { 0 },
    };
    // Our REP: hello, nonce, and (with a key) our proof over both.
    let mut rep = local.encode().to_vec();
    rep.extend_from_slice(&secret::nonce());
    let pending_auth = opts.auth.as_ref().map(|key| {
        let req = pd[..proto::REQ_LEN].to_vec();
        let proof = crate::auth::server_proof(key, &req, &rep);
        rep.extend_from_slice(&proof);
        PendingAuth { key: key.clone(), req, rep: rep.clone() }
    });
    let agreed = proto::agree(&local, &remote);
    let max_rd = dom.dev.max_rd_atom;
    // No remote access at all: a server's memory is never reachable.
    let conn = Conn::new(dom, child, ch, agreed, opts.clone(), peer.clone(), stats.clone(), ibv_access_flags(0))?;
    conn.qp.to_rts(conn.id(), agreed.path_mtu, port.link_layer == 2, opts)?;
    conn.expect_auth(pending_auth);
    let hello = rep;
    let mut param: rdma_conn_param = unsafe { std::mem::zeroed() };
    param.private_data = hello.as_ptr() as *const _;
    param.private_data_len = hello.len() as u8;
    param.responder_resources = max_rd;
    param.initiator_depth = max_rd;
    param.retry_count = opts.retry_cnt.min(7);
    param.rnr_retry_count = opts.rnr_retry.min(7);
    param.qp_num = conn.qp.qp_num();
    check(unsafe { rdma_accept(conn.id().0, &mut param) }, "rdma_accept")?;
    stats.connections.fetch_add(1, Relaxed);
    tracing::debug!(%peer, ?agreed, "RDMA connection accepted");
    Ok(conn)
}

/// Units of the pulled-bulk budget.
const UNIT: usize = 4096;

async fn handle(conn: Arc<Conn>, service: Arc<dyn RpcService>, memory: Arc<Semaphore>, h: Header, inline: Bytes) {
    let Ok(_permit) = conn.handlers.acquire().await else { return };
    // Room for the bulk we are about to pull, until the request is answered.
    let pulled = if h.has(proto::F_BULK_REMOTE) { (h.read.len as usize).div_ceil(UNIT) as u32 } else { 0 };
    let Ok(_room) = memory.acquire_many(pulled).await else { return };
    let req = match gather(&conn, &h, inline).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(peer = %conn.peer, "RDMA request {} dropped: {e}", h.id);
            conn.fail(&e.to_string());
            return;
        }
    };
    let reply = service.handle(req).await;
    if let Err(e) = reply_to(&conn, &h, reply).await {
        tracing::debug!(peer = %conn.peer, "RDMA reply {} not sent: {e}", h.id);
    }
}

/// The request as the service sees it: inline parts, or pulled by RDMA Read.
async fn gather(conn: &Conn, h: &Header, inline: Bytes) -> Result<Message, TransportError> {
    let (hl, bl) = (h.head_len as usize, h.bulk_len as usize);
    if !h.has(proto::F_BULK_REMOTE) {
        return Ok(Message { head: inline.slice(..hl), bulk: inline.slice(hl..hl + bl) });
    }
    let buf = conn.dom.local.get(h.read.len as usize)?;
    let buf = conn.read(buf, h.read).await?;
    let head_remote = h.has(proto::F_HEAD_REMOTE);
    let off = if head_remote { hl } else { 0 };
    let head = if head_remote { Bytes::copy_from_slice(&buf.as_ref()[..hl]) } else { inline.slice(..hl) };
    let bulk = if bl <= conn.opts.copy_threshold {
        Bytes::copy_from_slice(&buf.as_ref()[off..off + bl])
    } else {
        // zero-copy: the pool buffer returns when the service drops the bulk
        Bytes::from_owner(buf).slice(off..)
    };
    Ok(Message { head, bulk })
}

/// Registered memory holding `b` for an RDMA Write: copied below the
/// threshold, registered (once, cached) above it.
fn source(conn: &Conn, b: &Bytes) -> io::Result<Holder> {
    if b.len() >= conn.opts.copy_threshold {
        return Ok(Holder::Mr(conn.dom.local_cache.get(b)?));
    }
    let mut p = conn.dom.local.get(b.len())?;
    p.full_mut()[..b.len()].copy_from_slice(b);
    Ok(Holder::Buf(p))
}

async fn reply_to(conn: &Conn, req: &Header, reply: Message) -> Result<(), TransportError> {
    let a = conn.agreed;
    let room = a.msg_size as usize - HEADER_LEN;
    let (hl, bl) = (reply.head.len(), reply.bulk.len());
    let mut h = Header { kind: proto::KIND_REPLY, id: req.id, head_len: hl as u32, bulk_len: bl as u32, ..Default::default() };
    let mut writes = Vec::new();
    let head_fits = hl <= room;
    // A written head leaves the whole Send for an inline bulk.
    let inline_head = if head_fits { hl } else { 0 };
    let bulk_inline = bl == 0 || (bl <= a.inline_threshold as usize && inline_head + bl <= room);
    let mut too_large = (hl.max(bl) > MAX_PART as usize).then_some(hl.max(bl));
    if too_large.is_none() && !head_fits {
        if hl <= req.reply_head.len as usize {
            writes.push((source(conn, &reply.head)?, req.reply_head));
            h.flags |= proto::F_HEAD_WRITTEN;
        } else {
            too_large = Some(hl);
        }
    }
    if too_large.is_none() && !bulk_inline {
        if bl <= req.reply_bulk.len as usize {
            writes.push((source(conn, &reply.bulk)?, req.reply_bulk));
            h.flags |= proto::F_BULK_WRITTEN;
        } else {
            too_large = Some(bl);
        }
    }
    if let Some(n) = too_large {
        writes.clear();
        let len = n.min(u32::MAX as usize) as u32;
        h = Header {
            kind: proto::KIND_REPLY,
            flags: proto::F_TOO_LARGE,
            id: req.id,
            reply_bulk: Region { len, ..Default::default() },
            ..Default::default()
        };
    }
    let mut msg = conn.dom.local.get(HEADER_LEN + h.inline_len())?;
    {
        let m = msg.full_mut();
        h.encode(&mut m[..HEADER_LEN]);
        let mut off = HEADER_LEN;
        if too_large.is_none() && !h.has(proto::F_HEAD_WRITTEN) {
            m[off..off + hl].copy_from_slice(&reply.head);
            off += hl;
        }
        if too_large.is_none() && !h.has(proto::F_BULK_WRITTEN) {
            m[off..off + bl].copy_from_slice(&reply.bulk);
        }
    }
    conn.send(msg, writes, |_| {}).await
}
