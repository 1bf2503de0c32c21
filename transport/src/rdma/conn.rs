//! One established RDMA connection: its queue pair, receive buffers, credits,
//! outstanding work requests, and the driver task that turns completions
//! into progress.
//!
//! Credits: the peer keeps `R` receives posted; we may have `R - 1` ordinary
//! Sends outstanding plus one *reserved* for a credit update, so an update
//! can always be sent and no Send ever finds the peer without a posted
//! receive (the QPs use `rnr_retry = 0` by default: an RNR would be a bug,
//! and it fails loudly). Every Send carries the receives we re-posted since
//! our last Send (piggybacked); when half of ours are waiting to be reported
//! and no other Send went out, we send an explicit credit update.
//!
//! Memory safety with the HCA: every buffer a posted work request refers to
//! is owned by that request's entry (`inflight`, `recv_bufs`, or a client's
//! `pending` call, whose reply buffers the server may still write) until the
//! request completes, or until the QP is destroyed when the connection drops.
//! A cancelled call therefore never frees memory the peer can still reach.

use super::cm::{CmEvent, CmId, EventChannel};
use super::domain::Domain;
use super::mrcache::CachedMr;
use super::pool::PoolBuf;
use super::proto::{self, Agreed, Header, Region, HEADER_LEN};
use super::qp::Qp;
use super::{Counters, RdmaOptions};
use crate::{Message, TransportError};
use bytes::Bytes;
use rdma_sys::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::{oneshot, Notify, Semaphore};

const RECV_TAG: u64 = 1 << 63;

/// Something that keeps registered memory alive while the HCA uses it.
pub(crate) enum Holder {
    Buf(PoolBuf),
    Mr(Arc<CachedMr>),
}

impl Holder {
    fn sge(&self) -> ibv_sge {
        match self {
            Holder::Buf(b) => ibv_sge { addr: b.addr(), length: b.len() as u32, lkey: b.lkey() },
            Holder::Mr(m) => ibv_sge { addr: m.data.as_ptr() as u64, length: m.data.len() as u32, lkey: m.mr.lkey() },
        }
    }
}

type Done = oneshot::Sender<Result<Vec<Holder>, String>>;

struct Inflight {
    holders: Vec<Holder>,
    done: Option<Done>,
}

/// A client call whose request has been posted.
pub(crate) struct PendingCall {
    pub waiter: Option<oneshot::Sender<Result<Message, TransportError>>>,
    pub reply_bulk: Option<PoolBuf>,
    pub reply_head: Option<PoolBuf>,
    /// The request's remote part: the server may still be reading it.
    pub _request: Vec<Holder>,
}

pub(crate) struct State {
    send_credits: u32,
    reserve: bool,
    to_return: u32,
    next_wr: u64,
    inflight: HashMap<u64, Inflight>,
    recv_bufs: Vec<Option<PoolBuf>>,
    dead: Option<String>,
    pub pending: HashMap<u64, PendingCall>,
}

/// What to do with a received request or reply.
pub(crate) type OnRequest = Arc<dyn Fn(&Arc<Conn>, Header, Bytes) + Send + Sync>;

/// Server: what checking the client's proof needs (`crate::auth`), kept
/// until its KIND_AUTH arrives.
pub(crate) struct PendingAuth {
    pub key: secret::Key,
    /// the client's CM REQ private data (hello + nonce)
    pub req: Vec<u8>,
    /// our CM REP private data (hello + nonce + proof)
    pub rep: Vec<u8>,
}

pub(crate) enum Role {
    Client,
    Server(OnRequest),
}

pub(crate) struct Conn {
    // Field order is drop order: the QP goes first, so the HCA is done with
    // every buffer before `state` (which owns them) is dropped.
    pub qp: Qp,
    state: Mutex<State>,
    id: CmId,
    ch: EventChannel,
    pub dom: Arc<Domain>,
    pub agreed: Agreed,
    pub opts: RdmaOptions,
    pub peer: String,
    pub stats: Arc<Counters>,
    credit_notify: Notify,
    kill: Notify,
    dead: AtomicBool,
    /// Server: requests being handled at once (bounds send-queue use).
    pub handlers: Semaphore,
    /// Server: the proof still owed by the client; no request is served
    /// while it is. `None`: proved, or no key (`--insecure`).
    auth: Mutex<Option<PendingAuth>>,
}

impl Conn {
    /// Create the QP, bring it to INIT and post every receive buffer, so the
    /// peer may send the moment the connection is established.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dom: Arc<Domain>,
        id: CmId,
        ch: EventChannel,
        agreed: Agreed,
        opts: RdmaOptions,
        peer: String,
        stats: Arc<Counters>,
        remote_access: ibv_access_flags,
    ) -> std::io::Result<Arc<Conn>> {
        let r = agreed.recv_count;
        // Per request in flight a server posts at most a Read, two Writes and a Send.
        let in_flight = opts.max_in_flight.max(1);
        let qp = Qp::create(&dom, 4 * (in_flight.max(r as usize) as u32) + 16, r)?;
        qp.to_init(&id, remote_access)?;
        let conn = Arc::new(Conn {
            qp,
            state: Mutex::new(State {
                send_credits: agreed.send_credits,
                reserve: true,
                to_return: 0,
                next_wr: 1,
                inflight: HashMap::new(),
                recv_bufs: (0..r).map(|_| None).collect(),
                dead: None,
                pending: HashMap::new(),
            }),
            id,
            ch,
            dom,
            agreed,
            handlers: Semaphore::new(in_flight),
            opts,
            peer,
            stats,
            credit_notify: Notify::new(),
            kill: Notify::new(),
            dead: AtomicBool::new(false),
            auth: Mutex::new(None),
        });
        {
            let mut st = conn.state.lock().unwrap();
            for i in 0..r as usize {
                let b = conn.dom.local.get(agreed.msg_size as usize)?;
                st.recv_bufs[i] = Some(b);
                conn.post_recv(&mut st, i)?;
            }
        }
        Ok(conn)
    }

    /// Server: serve nothing until the client proves the key in `pending`.
    pub(crate) fn expect_auth(&self, pending: Option<PendingAuth>) {
        *self.auth.lock().unwrap() = pending;
    }

    pub(crate) fn awaits_auth(&self) -> bool {
        self.auth.lock().unwrap().is_some()
    }

    /// Server: a KIND_AUTH message. `Err` names why the connection must close.
    fn check_auth(&self, proof: &[u8]) -> Result<(), String> {
        let Some(p) = self.auth.lock().unwrap().take() else {
            return Err("an authentication message nobody asked for".into());
        };
        if crate::auth::check_client(&p.key, &p.req, &p.rep, proof) {
            Ok(())
        } else {
            Err("client failed authentication: its proof does not match this volume's secret \
                 (a gateway with another --secret-file, or not one of ours)"
                .into())
        }
    }

    pub(crate) fn id(&self) -> &CmId {
        &self.id
    }

    pub(crate) fn channel(&self) -> &EventChannel {
        &self.ch
    }

    /// The client learns the peer's offer only after its receives are
    /// posted; settle credits and sizes before the connection is shared.
    pub(crate) fn with_agreed(mut conn: Arc<Conn>, agreed: Agreed) -> Arc<Conn> {
        let c = Arc::get_mut(&mut conn).expect("connection not shared before the handshake");
        c.agreed = agreed;
        c.state.get_mut().unwrap().send_credits = agreed.send_credits;
        conn
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Relaxed)
    }

    fn post_recv(&self, st: &mut State, i: usize) -> std::io::Result<()> {
        let b = st.recv_bufs[i].as_ref().unwrap();
        let mut sge = ibv_sge { addr: b.addr(), length: b.cap() as u32, lkey: b.lkey() };
        let mut wr = ibv_recv_wr { wr_id: RECV_TAG | i as u64, next: std::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad = std::ptr::null_mut();
        super::device::check(unsafe { ibv_post_recv(self.qp.qp, &mut wr, &mut bad) }, "ibv_post_recv")
    }

    /// Mark the connection dead (first reason wins): the QP goes to ERR so the
    /// peer can no longer touch our memory, every waiter fails, and the peer
    /// is told through rdma_cm. Buffers stay owned until the QP is destroyed.
    fn fail_locked(&self, st: &mut State, why: &str) {
        if st.dead.is_some() {
            return;
        }
        tracing::debug!(peer = %self.peer, "RDMA connection down: {why}");
        st.dead = Some(why.to_string());
        self.dead.store(true, Relaxed);
        self.qp.to_err();
        unsafe {
            rdma_disconnect(self.id.0);
        }
        for p in st.pending.values_mut() {
            if let Some(w) = p.waiter.take() {
                let _ = w.send(Err(TransportError::Disconnected(format!("{}: {why}", self.peer))));
            }
        }
        for f in st.inflight.values_mut() {
            if let Some(d) = f.done.take() {
                let _ = d.send(Err(why.to_string()));
            }
        }
        self.credit_notify.notify_waiters();
        self.kill.notify_one();
    }

    pub(crate) fn fail(&self, why: &str) {
        let mut st = self.state.lock().unwrap();
        self.fail_locked(&mut st, why);
    }

    fn disconnected(&self, st: &State) -> TransportError {
        TransportError::Disconnected(format!("{}: {}", self.peer, st.dead.as_deref().unwrap_or("closed")))
    }

    /// Post RDMA Writes (each `(source, destination)`) followed by the Send
    /// `msg` (header already encoded) once a credit allows. `on_post` runs
    /// under the state lock right before posting (a client registers its
    /// pending call there, so it exists before any reply can arrive and is
    /// never registered for a request that was not sent).
    pub(crate) async fn send(
        &self,
        msg: PoolBuf,
        writes: Vec<(Holder, Region)>,
        on_post: impl FnOnce(&mut State),
    ) -> Result<(), TransportError> {
        let mut waited = false;
        let mut msg = Some(msg);
        let mut writes = Some(writes);
        let mut on_post = Some(on_post);
        loop {
            let notified = self.credit_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state.lock().unwrap();
                if st.dead.is_some() {
                    return Err(self.disconnected(&st));
                }
                if st.send_credits > 0 {
                    st.send_credits -= 1;
                    (on_post.take().unwrap())(&mut st);
                    return self.post_locked(&mut st, msg.take().unwrap(), writes.take().unwrap()).map_err(|e| {
                        self.fail_locked(&mut st, &e);
                        TransportError::Disconnected(format!("{}: {e}", self.peer))
                    });
                }
            }
            if !waited {
                waited = true;
                self.stats.credit_waits.fetch_add(1, Relaxed);
            }
            notified.await;
        }
    }

    fn post_locked(&self, st: &mut State, mut msg: PoolBuf, writes: Vec<(Holder, Region)>) -> Result<(), String> {
        let credits = st.to_return.min(u16::MAX as u32);
        st.to_return -= credits;
        msg.full_mut()[6..8].copy_from_slice(&(credits as u16).to_le_bytes());
        let n = writes.len() + 1;
        let mut sges: Vec<ibv_sge> = Vec::with_capacity(n);
        let mut wrs: Vec<ibv_send_wr> = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let signaled = ibv_send_flags::IBV_SEND_SIGNALED.0;
        for (src, dst) in writes {
            let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
            wr.wr_id = st.next_wr;
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.send_flags = signaled;
            wr.wr.rdma = rdma_t { remote_addr: dst.addr, rkey: dst.rkey };
            sges.push(src.sge());
            self.stats.writes.fetch_add(1, Relaxed);
            self.stats.bytes_written.fetch_add(src.sge().length as u64, Relaxed);
            st.inflight.insert(st.next_wr, Inflight { holders: vec![src], done: None });
            ids.push(st.next_wr);
            st.next_wr += 1;
            wrs.push(wr);
        }
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = st.next_wr;
        wr.opcode = ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = signaled;
        if msg.len() as u32 <= self.qp.max_inline {
            wr.send_flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        sges.push(ibv_sge { addr: msg.addr(), length: msg.len() as u32, lkey: msg.lkey() });
        st.inflight.insert(st.next_wr, Inflight { holders: vec![Holder::Buf(msg)], done: None });
        ids.push(st.next_wr);
        st.next_wr += 1;
        wrs.push(wr);
        self.stats.sends.fetch_add(1, Relaxed);
        self.post_chain(st, &mut wrs, &mut sges, &ids)
    }

    fn post_chain(&self, st: &mut State, wrs: &mut [ibv_send_wr], sges: &mut [ibv_sge], ids: &[u64]) -> Result<(), String> {
        let n = wrs.len();
        for i in 0..n {
            wrs[i].sg_list = &mut sges[i];
            wrs[i].num_sge = 1;
            wrs[i].next = if i + 1 < n { &mut wrs[i + 1] as *mut _ } else { std::ptr::null_mut() };
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        let rc = unsafe { ibv_post_send(self.qp.qp, wrs.as_mut_ptr(), &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        // Requests from `bad` on were not posted: they will never complete.
        let first_bad = (0..n).find(|&i| std::ptr::eq(&wrs[i], bad)).unwrap_or(0);
        for id in &ids[first_bad..] {
            st.inflight.remove(id);
        }
        Err(format!("ibv_post_send: {}", std::io::Error::from_raw_os_error(rc)))
    }

    /// RDMA-Read `remote` into `dst` (server side, request bulk).
    pub(crate) async fn read(&self, dst: PoolBuf, remote: Region) -> Result<PoolBuf, TransportError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().unwrap();
            if st.dead.is_some() {
                return Err(self.disconnected(&st));
            }
            let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
            wr.wr_id = st.next_wr;
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_READ;
            wr.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.wr.rdma = rdma_t { remote_addr: remote.addr, rkey: remote.rkey };
            let mut sge = ibv_sge { addr: dst.addr(), length: remote.len, lkey: dst.lkey() };
            let id = st.next_wr;
            st.next_wr += 1;
            st.inflight.insert(id, Inflight { holders: vec![Holder::Buf(dst)], done: Some(tx) });
            self.stats.reads.fetch_add(1, Relaxed);
            self.stats.bytes_read.fetch_add(remote.len as u64, Relaxed);
            if let Err(e) = self.post_chain(&mut st, std::slice::from_mut(&mut wr), std::slice::from_mut(&mut sge), &[id]) {
                self.fail_locked(&mut st, &e);
                return Err(self.disconnected(&st));
            }
        }
        match rx.await {
            Ok(Ok(mut h)) => match h.pop() {
                Some(Holder::Buf(b)) => Ok(b),
                _ => unreachable!("a read holds its destination"),
            },
            Ok(Err(why)) => Err(TransportError::Disconnected(format!("{}: RDMA Read failed: {why}", self.peer))),
            Err(_) => Err(TransportError::Disconnected(format!("{}: connection closed", self.peer))),
        }
    }

    /// Close locally (client dropped, server shutting down).
    pub(crate) fn close(&self, why: &str) {
        self.fail(why);
    }

    /// Credits and posted receives, for tests and status.
    pub(crate) fn credit_state(&self) -> (u32, bool, u32) {
        let st = self.state.lock().unwrap();
        (st.send_credits, st.reserve, st.to_return)
    }

    /// The completion loop: runs until the connection dies.
    pub(crate) async fn drive(self: Arc<Self>, role: Role) {
        let comp = if self.opts.busy_poll {
            None
        } else {
            match super::cm::watch(self.qp.comp_fd()) {
                Ok(a) => Some(a),
                Err(e) => {
                    self.fail(&format!("completion channel: {e}"));
                    return;
                }
            }
        };
        self.qp.arm();
        let mut wcs: Vec<ibv_wc> = (0..32).map(|_| unsafe { std::mem::zeroed() }).collect();
        loop {
            loop {
                let n = self.qp.poll(&mut wcs);
                if n == 0 {
                    break;
                }
                self.process(&wcs[..n], &role);
            }
            if self.is_dead() {
                break;
            }
            match &comp {
                None => {
                    // busy-poll: trade a core for the interrupt + wake-up latency
                    match self.ch.try_next() {
                        Ok(Some(ev)) => self.on_cm_event(ev),
                        Ok(None) => {}
                        Err(e) => self.fail(&format!("rdma_cm: {e}")),
                    }
                    tokio::task::yield_now().await;
                }
                Some(comp) => tokio::select! {
                    g = comp.readable() => match g {
                        Ok(mut g) => {
                            self.qp.take_events();
                            g.clear_ready();
                            self.qp.arm(); // then poll again: nothing slips between
                        }
                        Err(e) => self.fail(&format!("completion channel: {e}")),
                    },
                    ev = self.ch.next() => match ev {
                        Ok(ev) => self.on_cm_event(ev),
                        Err(e) => self.fail(&format!("rdma_cm: {e}")),
                    },
                    _ = self.kill.notified() => {}
                },
            }
        }
    }

    fn on_cm_event(&self, ev: CmEvent) {
        match ev.kind() {
            rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED | rdma_cm_event_type::RDMA_CM_EVENT_TIMEWAIT_EXIT => {}
            _ => self.fail(&format!("peer: {}", ev.name())),
        }
    }

    fn process(self: &Arc<Self>, wcs: &[ibv_wc], role: &Role) {
        let mut deliveries = Vec::new();
        let mut credits_arrived = false;
        {
            let mut st = self.state.lock().unwrap();
            for wc in wcs {
                let ok = wc.status == ibv_wc_status::IBV_WC_SUCCESS;
                let status = || unsafe { std::ffi::CStr::from_ptr(ibv_wc_status_str(wc.status)).to_string_lossy().into_owned() };
                if wc.wr_id & RECV_TAG == 0 {
                    let Some(mut f) = st.inflight.remove(&wc.wr_id) else { continue };
                    if ok {
                        if let Some(d) = f.done.take() {
                            let _ = d.send(Ok(std::mem::take(&mut f.holders)));
                        }
                    } else {
                        let why = format!("work request failed: {}", status());
                        if let Some(d) = f.done.take() {
                            let _ = d.send(Err(why.clone()));
                        }
                        self.fail_locked(&mut st, &why);
                    }
                    continue;
                }
                let i = (wc.wr_id & !RECV_TAG) as usize;
                if !ok || st.dead.is_some() {
                    self.fail_locked(&mut st, &format!("receive failed: {}", status()));
                    continue; // the buffer stays owned until the QP is destroyed
                }
                let buf = st.recv_bufs[i].as_ref().unwrap();
                let data = &buf.full()[..wc.byte_len as usize];
                let h = match Header::decode(data) {
                    Ok(h) => h,
                    Err(e) => {
                        self.stats.protocol_errors.fetch_add(1, Relaxed);
                        tracing::warn!(peer = %self.peer, "RDMA peer sent an invalid message; dropping it: {e}");
                        self.fail_locked(&mut st, &e.to_string());
                        continue;
                    }
                };
                let inline = Bytes::copy_from_slice(&data[HEADER_LEN..]);
                if let Err(e) = self.post_recv(&mut st, i) {
                    self.fail_locked(&mut st, &e.to_string());
                    continue;
                }
                st.to_return += 1;
                if h.credits > 0 {
                    let mut n = h.credits as u32;
                    if !st.reserve {
                        st.reserve = true;
                        n -= 1;
                    }
                    st.send_credits += n;
                    credits_arrived = true;
                    if st.send_credits > self.agreed.send_credits {
                        self.stats.protocol_errors.fetch_add(1, Relaxed);
                        self.fail_locked(&mut st, "peer returned more credits than it has receive buffers");
                        continue;
                    }
                }
                if h.kind == proto::KIND_CREDIT {
                    continue;
                }
                match role {
                    Role::Client => {
                        if h.kind != proto::KIND_REPLY {
                            self.fail_locked(&mut st, "server sent a request");
                            continue;
                        }
                        let Some(mut p) = st.pending.remove(&h.id) else {
                            self.stats.protocol_errors.fetch_add(1, Relaxed);
                            self.fail_locked(&mut st, &format!("reply to unknown call {}", h.id));
                            continue;
                        };
                        let r = reply_message(&h, inline, &mut p, self.opts.copy_threshold);
                        if let Err(TransportError::Protocol(e)) = &r {
                            self.stats.protocol_errors.fetch_add(1, Relaxed);
                            self.fail_locked(&mut st, e);
                        }
                        if let Some(w) = p.waiter.take() {
                            let _ = w.send(r);
                        }
                    }
                    Role::Server(_) => {
                        if h.kind == proto::KIND_AUTH {
                            if let Err(why) = self.check_auth(&inline) {
                                self.stats.rejected.fetch_add(1, Relaxed);
                                tracing::warn!(peer = %self.peer, "RDMA connection refused: {why}");
                                self.fail_locked(&mut st, &why);
                            }
                            continue;
                        }
                        if h.kind != proto::KIND_REQUEST {
                            self.fail_locked(&mut st, "client sent a reply");
                            continue;
                        }
                        if self.awaits_auth() {
                            self.stats.rejected.fetch_add(1, Relaxed);
                            tracing::warn!(peer = %self.peer, "RDMA connection refused: a request before authentication");
                            self.fail_locked(&mut st, "a request before authentication");
                            continue;
                        }
                        deliveries.push((h, inline));
                    }
                }
            }
        }
        if credits_arrived {
            self.credit_notify.notify_waiters();
        }
        if let Role::Server(on_request) = role {
            for (h, inline) in deliveries {
                on_request(self, h, inline);
            }
        }
        self.maybe_send_update();
    }

    /// Explicit credit update once half our receives wait to be reported.
    fn maybe_send_update(&self) {
        let mut st = self.state.lock().unwrap();
        if st.dead.is_some() || st.to_return < (self.agreed.recv_count / 2).max(1) {
            return;
        }
        if st.reserve {
            st.reserve = false;
        } else if st.send_credits > 0 {
            st.send_credits -= 1;
        } else {
            return; // retried when credits come back
        }
        let mut buf = match self.dom.local.get(HEADER_LEN) {
            Ok(b) => b,
            Err(e) => return self.fail_locked(&mut st, &e.to_string()),
        };
        Header { kind: proto::KIND_CREDIT, ..Default::default() }.encode(buf.full_mut());
        self.stats.credit_updates.fetch_add(1, Relaxed);
        if let Err(e) = self.post_locked(&mut st, buf, Vec::new()) {
            self.fail_locked(&mut st, &e);
        }
    }
}

/// Assemble a client's reply from the inline parts and what the server wrote.
fn reply_message(h: &Header, inline: Bytes, p: &mut PendingCall, copy_threshold: usize) -> Result<Message, TransportError> {
    let bad = |why: &str| Err(TransportError::Protocol(why.to_string()));
    if h.has(proto::F_TOO_LARGE) {
        return Err(TransportError::TooLarge(h.reply_bulk.len as usize));
    }
    let (hl, bl) = (h.head_len as usize, h.bulk_len as usize);
    let mut off = 0;
    let head = if h.has(proto::F_HEAD_WRITTEN) {
        match p.reply_head.take() {
            Some(b) if hl <= b.cap() => Bytes::copy_from_slice(&b.full()[..hl]),
            _ => return bad("server wrote a head the client had no room for"),
        }
    } else {
        off = hl;
        inline.slice(..hl)
    };
    let bulk = if h.has(proto::F_BULK_WRITTEN) {
        match p.reply_bulk.take() {
            Some(mut b) if bl <= b.cap() => {
                if bl <= copy_threshold {
                    Bytes::copy_from_slice(&b.full()[..bl])
                } else {
                    // Zero-copy: the registered buffer goes back to its pool
                    // when the caller drops the last clone of this Bytes.
                    b.set_len(bl);
                    Bytes::from_owner(b)
                }
            }
            _ => return bad("server wrote a bulk the client had no room for"),
        }
    } else {
        inline.slice(off..off + bl)
    };
    Ok(Message { head, bulk })
}
