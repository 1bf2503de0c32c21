//! The client end: one connection per server, (re)opened on demand; many
//! calls in flight on it, matched to replies by id.

use super::cm::{resolve, CmId, EventChannel, RawAddr};
use super::conn::{Conn, Holder, PendingCall, Role};
use super::device::check;
use super::domain::{exposed_access, Domain};
use super::proto::{self, Header, Hello, Region, HEADER_LEN, MAX_PART};
use super::{Counters, RdmaOptions, RdmaStats};
use crate::{Message, RpcClient, TransportError};
use async_trait::async_trait;
use rdma_sys::*;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::oneshot;

/// An RDMA [`RpcClient`]. Share it (`Arc`); all calls use one connection.
pub struct RdmaClient {
    addr: String,
    opts: RdmaOptions,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
    stats: Arc<Counters>,
}

impl RdmaClient {
    /// A client that connects on its first call.
    pub fn new(addr: impl Into<String>, opts: RdmaOptions) -> RdmaClient {
        RdmaClient {
            addr: addr.into(),
            opts,
            conn: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
            stats: Arc::default(),
        }
    }

    /// A client whose connection (and handshake) is established now.
    pub async fn connect(addr: impl Into<String>, opts: RdmaOptions) -> Result<RdmaClient, TransportError> {
        let c = RdmaClient::new(addr, opts);
        c.connection().await?;
        Ok(c)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn stats(&self) -> RdmaStats {
        let mut s = self.stats.snapshot();
        if let Ok(g) = self.conn.try_lock() {
            if let Some(c) = g.as_ref() {
                s.mr_cache_hits = c.dom.read_cache.hits.load(Relaxed);
                s.mr_cache_misses = c.dom.read_cache.misses.load(Relaxed);
            }
        }
        s
    }

    /// What the handshake settled on (None before the first connection).
    pub async fn agreed(&self) -> Option<proto::Agreed> {
        self.conn.lock().await.as_ref().map(|c| c.agreed)
    }

    /// Tests only: (ordinary send credits, reserved credit available, receives not yet reported).
    #[doc(hidden)]
    pub async fn credit_state(&self) -> Option<(u32, bool, u32)> {
        self.conn.lock().await.as_ref().map(|c| c.credit_state())
    }

    /// Whether a live connection exists (a dead one is replaced by the next call).
    pub async fn is_connected(&self) -> bool {
        self.conn.lock().await.as_ref().is_some_and(|c| !c.is_dead())
    }

    /// Tests only: post `bytes` as a raw Send (a misbehaving peer).
    #[doc(hidden)]
    pub async fn send_raw(&self, bytes: &[u8]) -> Result<(), TransportError> {
        let conn = self.connection().await?;
        let mut b = conn.dom.local.get(bytes.len())?;
        b.full_mut()[..bytes.len()].copy_from_slice(bytes);
        conn.send(b, Vec::new(), |_| {}).await
    }

    /// Close the connection (the next call reconnects).
    pub async fn close(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            c.close("closed by client");
        }
    }

    async fn connection(&self) -> Result<Arc<Conn>, TransportError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_dead() {
                return Ok(c.clone());
            }
            tracing::info!(peer = %self.addr, "RDMA connection lost; reconnecting");
        }
        *slot = None;
        let t = self.opts.connect_timeout;
        let c = tokio::time::timeout(t, connect(&self.addr, &self.opts, self.stats.clone()))
            .await
            .map_err(|_| TransportError::Connect(format!("{}: RDMA connect timed out after {t:?}", self.addr)))??;
        tokio::spawn(c.clone().drive(Role::Client));
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn call_inner(&self, req: Message, reply_bulk_max: usize) -> Result<Message, TransportError> {
        if req.head.len() > MAX_PART as usize || req.bulk.len() > MAX_PART as usize {
            return Err(TransportError::TooLarge(req.head.len() + req.bulk.len()));
        }
        let conn = self.connection().await?;
        let (a, dom, opts) = (conn.agreed, &conn.dom, &self.opts);
        let id = self.next_id.fetch_add(1, Relaxed);
        let room = a.msg_size as usize - HEADER_LEN;
        let (hl, bl) = (req.head.len(), req.bulk.len());
        let head_inline = hl <= room;
        let bulk_inline = head_inline && bl <= a.inline_threshold as usize && hl + bl <= room;
        let mut h = Header { kind: proto::KIND_REQUEST, id, head_len: hl as u32, bulk_len: bl as u32, ..Default::default() };

        // The part the server will RDMA-Read.
        let mut request = Vec::new();
        if !bulk_inline {
            h.flags |= proto::F_BULK_REMOTE;
            if !head_inline {
                h.flags |= proto::F_HEAD_REMOTE;
            }
            if head_inline && bl >= opts.copy_threshold {
                let mr = dom.read_cache.get(&req.bulk)?;
                h.read = Region { addr: req.bulk.as_ptr() as u64, rkey: mr.mr.rkey(), len: bl as u32 };
                request.push(Holder::Mr(mr));
            } else {
                let parts: &[&[u8]] = if head_inline { &[&req.bulk] } else { &[&req.head, &req.bulk] };
                let len = parts.iter().map(|p| p.len()).sum::<usize>();
                let mut b = dom.exposed.get(len)?;
                let mut off = 0;
                for p in parts {
                    b.full_mut()[off..off + p.len()].copy_from_slice(p);
                    off += p.len();
                }
                h.read = Region { addr: b.addr(), rkey: b.rkey(), len: len as u32 };
                request.push(Holder::Buf(b));
            }
        }
        // Where the server may write a reply that does not fit a Send.
        let reply_bulk_max = reply_bulk_max.min(MAX_PART as usize);
        let reply_bulk = if reply_bulk_max > a.inline_threshold as usize {
            let b = dom.exposed.get(reply_bulk_max)?;
            h.reply_bulk = Region { addr: b.addr(), rkey: b.rkey(), len: reply_bulk_max as u32 };
            Some(b)
        } else {
            None
        };
        let reply_head = if opts.max_reply_head > room {
            let b = dom.exposed.get(opts.max_reply_head)?;
            h.reply_head = Region { addr: b.addr(), rkey: b.rkey(), len: opts.max_reply_head as u32 };
            Some(b)
        } else {
            None
        };

        let mut msg = dom.local.get(HEADER_LEN + h.inline_len())?;
        {
            let m = msg.full_mut();
            h.encode(&mut m[..HEADER_LEN]);
            let mut off = HEADER_LEN;
            if head_inline {
                m[off..off + hl].copy_from_slice(&req.head);
                off += hl;
            }
            if bulk_inline {
                m[off..off + bl].copy_from_slice(&req.bulk);
            }
        }
        let (tx, rx) = oneshot::channel();
        let pending = PendingCall { waiter: Some(tx), reply_bulk, reply_head, _request: request };
        conn.send(msg, Vec::new(), move |st| {
            st.pending.insert(id, pending);
        })
        .await?;
        rx.await
            .unwrap_or_else(|_| Err(TransportError::Disconnected(format!("{}: connection closed", self.addr))))
    }
}

impl Drop for RdmaClient {
    fn drop(&mut self) {
        if let Some(c) = self.conn.get_mut().take() {
            c.close("client dropped");
        }
    }
}

#[async_trait]
impl RpcClient for RdmaClient {
    async fn call(&self, req: Message, reply_bulk_max: usize) -> Result<Message, TransportError> {
        let t = self.opts.call_timeout;
        match tokio::time::timeout(t, self.call_inner(req, reply_bulk_max)).await {
            Ok(r) => r,
            Err(_) => Err(TransportError::Timeout(t)),
        }
    }

    fn describe(&self) -> String {
        format!("rdma://{}", self.addr)
    }
}

/// Resolve, handshake and establish one connection.
async fn connect(addr: &str, opts: &RdmaOptions, stats: Arc<Counters>) -> Result<Arc<Conn>, TransportError> {
    let cerr = |e: std::io::Error| TransportError::Connect(format!("{addr}: {e}"));
    let sa = resolve(addr).await.map_err(cerr)?;
    let ch = EventChannel::new().map_err(cerr)?;
    let id = CmId::new(&ch).map_err(cerr)?;
    let ms = 2000;
    check(unsafe { rdma_resolve_addr(id.0, std::ptr::null_mut(), RawAddr::new(sa).as_mut_ptr(), ms) }, "rdma_resolve_addr")
        .map_err(cerr)?;
    drop(ch.expect(rdma_cm_event_type::RDMA_CM_EVENT_ADDR_RESOLVED, "resolving address").await.map_err(cerr)?);
    check(unsafe { rdma_resolve_route(id.0, ms) }, "rdma_resolve_route").map_err(cerr)?;
    drop(ch.expect(rdma_cm_event_type::RDMA_CM_EVENT_ROUTE_RESOLVED, "resolving route").await.map_err(cerr)?);

    let dom = Domain::for_verbs(id.verbs(), opts.mr_cache_bytes).map_err(cerr)?;
    let port = dom.dev.query_port(id.port_num()).map_err(cerr)?;
    let local = Hello {
        recv_count: opts.recv_count,
        msg_size: opts.msg_size,
        inline_threshold: opts.inline_threshold,
        active_mtu: port.active_mtu as u8,
        flags: if opts.auth.is_some() { proto::HF_AUTH } else { 0 },
    };
    // Credits and QP depth are sized from our own offer until the peer answers;
    // the peer can only lower msg_size and inline_threshold.
    let provisional = proto::agree(&local, &local);
    let conn = Conn::new(dom.clone(), id, ch, provisional, opts.clone(), addr.to_string(), stats.clone(), exposed_access())
        .map_err(cerr)?;
    let hello = opts.hello_override.clone().unwrap_or_else(|| {
        let mut req = local.encode().to_vec();
        req.extend_from_slice(&secret::nonce());
        req
    });
    {
        let mut param: rdma_conn_param = unsafe { std::mem::zeroed() };
        param.private_data = hello.as_ptr() as *const _;
        param.private_data_len = hello.len() as u8;
        param.responder_resources = dom.dev.max_rd_atom;
        param.initiator_depth = dom.dev.max_rd_atom;
        param.retry_count = opts.retry_cnt.min(7);
        param.rnr_retry_count = opts.rnr_retry.min(7);
        param.qp_num = conn.qp.qp_num();
        check(unsafe { rdma_connect(conn.id().0, &mut param) }, "rdma_connect").map_err(cerr)?;
    }
    let ev = conn_event(&conn).await.map_err(cerr)?;
    let rep = ev.private_data();
    drop(ev);
    let remote = Hello::decode(&rep).map_err(|e| TransportError::Protocol(format!("{addr}: {e}")))?;
    // With a key, the server proves it holds it before we use the connection.
    let proof = match &opts.auth {
        None => None,
        Some(key) => {
            if remote.flags & proto::HF_AUTH == 0 || rep.len() < proto::REP_LEN {
                return Err(TransportError::Auth(format!(
                    "{addr}: the RDMA server does not authenticate (started with --insecure?); \
                     refusing it, since this client holds a volume secret"
                )));
            }
            let req = &hello[..proto::REQ_LEN.min(hello.len())];
            if !crate::auth::check_server(key, req, &rep[..proto::REQ_LEN], &rep[proto::REQ_LEN..proto::REP_LEN]) {
                return Err(TransportError::Auth(format!(
                    "{addr}: the RDMA server failed authentication: it does not hold this volume's secret"
                )));
            }
            Some(crate::auth::client_proof(key, req, &rep[..proto::REP_LEN]))
        }
    };
    let agreed = proto::agree(&local, &remote);
    let roce = port.link_layer == 2; // IBV_LINK_LAYER_ETHERNET
    conn.qp.to_rts(conn.id(), agreed.path_mtu, roce, opts).map_err(cerr)?;
    check(unsafe { rdma_establish(conn.id().0) }, "rdma_establish").map_err(cerr)?;
    let conn = Conn::with_agreed(conn, agreed);
    if let Some(proof) = proof {
        // The first Send on the connection, before any request can be.
        let mut b = conn.dom.local.get(HEADER_LEN + proof.len()).map_err(cerr)?;
        Header { kind: proto::KIND_AUTH, head_len: proof.len() as u32, ..Default::default() }.encode(b.full_mut());
        b.full_mut()[HEADER_LEN..HEADER_LEN + proof.len()].copy_from_slice(&proof);
        conn.send(b, Vec::new(), |_| {}).await?;
    }
    stats.connections.fetch_add(1, Relaxed);
    tracing::info!(peer = %addr, ?agreed, "RDMA connection established");
    Ok(conn)
}

async fn conn_event(conn: &Conn) -> std::io::Result<super::cm::CmEvent> {
    conn.channel().expect(rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_RESPONSE, "connecting").await
}
