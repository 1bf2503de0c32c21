//! The server end: the accept loop, the hello, and the slots.
//!
//! ```text
//!  accept ─> handshake slot (max_handshakes, oldest dropped when full; deadline handshake_timeout)
//!              │ client hello ok
//!              ├─ connection slot free ─────────────────────────────> hello ok ─> conn::serve
//!              ├─ all taken: close the longest-quiet idle connection ─> hello ok ─> conn::serve
//!              └─ all taken and busy ───────────────────────────────> status "busy", closed
//! ```
//!
//! Sockets that have not finished the hello never hold a connection slot,
//! so a crowd of silent or half-hello sockets cannot lock gateways out: at
//! most `max_handshakes` of them exist, each for at most the deadline, and a
//! newcomer pushes out the oldest. Established connections are swept every
//! quarter idle timeout ([`sweep`]): closed when idle, or when a frame or a
//! reply has stopped moving (the peer stopped sending mid-frame, or stopped
//! reading its replies) — which also gives back the memory they held.

use super::activity::Activity;
use super::conn::{self, Established};
use super::frame::{Hello, STATUS_BUSY, STATUS_OK, STATUS_TLS_REQUIRED};
use super::handshake;
use super::server_options::ServerOptions;
use super::shared::Shared;
use super::stats::Close;
use super::tls::Stream;
use super::*;
use crate::log_gate::LogGate;
use crate::RpcService;
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;

/// Serve `service` on `listener` until `shutdown` completes; then stop
/// accepting, stop reading new requests, and let in-flight ones finish.
pub async fn serve(
    listener: TcpListener,
    service: Arc<dyn RpcService>,
    opts: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let shared = Shared::new(service, opts);
    let sweeper = shared.opts.idle_timeout.map(|t| tokio::spawn(sweep(shared.clone(), t)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut handshakes = JoinSet::new();
    let mut oldest_first: VecDeque<AbortHandle> = VecDeque::new();
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((stream, peer)) => {
                    if !crate::allow::allows(&shared.opts.allow, peer.ip()) {
                        shared.stats().count(Close::NotAllowed);
                        static NOT_ALLOWED: LogGate = LogGate::new(Duration::from_secs(1));
                        if let Some(held) = NOT_ALLOWED.pass() {
                            tracing::warn!(%peer, held, "storage RPC connection refused: the address is not in --auth-allow");
                        }
                        continue; // dropped: closed without a word
                    }
                    oldest_first.retain(|h| !h.is_finished());
                    if oldest_first.len() >= shared.opts.max_handshakes.max(1) {
                        if let Some(h) = oldest_first.pop_front() {
                            h.abort();
                            shared.stats().count(Close::HandshakeEvicted);
                        }
                    }
                    oldest_first.push_back(handshakes.spawn(handshake(stream, peer, shared.clone())));
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = handshakes.join_next() => {
                if let Ok(Some(est)) = done {
                    conns.spawn(conn::serve(est, shared.clone(), stop_rx.clone()));
                }
            }
        }
        // Reap finished connections so the set does not grow without bound.
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    handshakes.shutdown().await;
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    if let Some(s) = sweeper {
        s.abort();
    }
    Ok(())
}

/// Hello within the deadline, or the socket is closed. Holds a handshake
/// slot (counted in `handshakes`) until it returns or is aborted.
async fn handshake(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) -> Option<Established> {
    let stats = &shared.opts.stats;
    stats.handshakes.fetch_add(1, Relaxed);
    struct Leave<'a>(&'a ServerStats);
    impl Drop for Leave<'_> {
        fn drop(&mut self) {
            self.0.handshakes.fetch_sub(1, Relaxed);
        }
    }
    let _leave = Leave(stats);
    let opened = async {
        let mut stream = open(stream, &shared).await?;
        let (hello, slot) = hello(&mut stream, &shared).await?;
        Ok((stream, hello, slot))
    };
    match tokio::time::timeout(shared.opts.handshake_timeout, opened).await {
        Ok(Ok((stream, hello, slot))) => Some(Established { stream, peer, hello, slot }),
        Ok(Err((why, detail))) => {
            stats.count(why);
            // Anyone who can connect can make these: log at a bounded rate.
            static REFUSED: LogGate = LogGate::new(Duration::from_secs(1));
            match why {
                Close::Peer => tracing::debug!(%peer, "storage RPC handshake: {detail}"),
                _ => {
                    if let Some(held) = REFUSED.pass() {
                        let more = if held > 0 { format!(" ({held} more since the last line)") } else { String::new() };
                        tracing::warn!(%peer, "storage RPC handshake refused: {detail}{more}");
                    }
                }
            }
            None
        }
        Err(_) => {
            stats.count(Close::HandshakeTimeout);
            tracing::debug!(%peer, "storage RPC handshake timed out");
            None
        }
    }
}

/// The byte stream the hello runs on: TLS first when the server has it.
async fn open(mut s: TcpStream, shared: &Shared) -> Result<Stream, (Close, String)> {
    let _ = s.set_nodelay(true);
    let Some(tls) = &shared.opts.tls else { return Ok(Stream::Plain(s)) };
    // A plain hello on a TLS port: say so in plain text, so the client's
    // error names the cause instead of a broken TLS record.
    let mut first = [0u8; 4];
    if matches!(s.peek(&mut first).await, Ok(4)) && first == MAGIC {
        refuse(&mut s, STATUS_TLS_REQUIRED).await;
        return Err((Close::HandshakeRefused, "a plain-text client on a TLS server (give it --tls-ca)".into()));
    }
    tls.accept(s).await.map_err(|e| (Close::HandshakeRefused, format!("TLS handshake: {e}")))
}

async fn hello(s: &mut Stream, shared: &Shared) -> Result<(Hello, OwnedSemaphorePermit), (Close, String)> {
    let o = &shared.opts;
    let theirs = match handshake::server(s, o.max_frame, o.idle_timeout, o.auth.as_ref()).await {
        Ok(Ok(h)) => h,
        Ok(Err(r)) => {
            if let Some(status) = r.status {
                refuse(s, status).await;
            }
            return Err((if r.auth { Close::AuthFailed } else { Close::HandshakeRefused }, r.why));
        }
        Err(e) => return Err((Close::Peer, format!("closed during the hello: {e}"))),
    };
    let Some(slot) = shared.take_slot().await else {
        refuse(s, STATUS_BUSY).await;
        let n = shared.opts.max_connections;
        return Err((Close::Busy, format!("all {n} connection slots are busy (imca storage --max-connections)")));
    };
    s.write_all(&Hello::verdict(STATUS_OK)).await.map_err(|e| (Close::Peer, format!("writing the verdict: {e}")))?;
    Ok((theirs, slot))
}

/// Say no in a way every version reads: the refusal, then our end closed,
/// and what the client already sent read (closing on unread bytes would
/// reset the connection, and the client might lose the refusal).
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, status: u16) {
    let _ = s.write_all(&Hello::refusal(status).wire()).await;
    let _ = s.shutdown().await;
    let mut sink = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_millis(200), s.read(&mut sink)).await;
}

/// Close what is idle or stalled, every quarter of the idle timeout.
async fn sweep(shared: Arc<Shared>, idle: Duration) {
    let mut tick = tokio::time::interval((idle / 4).clamp(Duration::from_millis(5), Duration::from_secs(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Instant::now();
        for a in shared.conns.lock().unwrap().values() {
            if let Some(why) = verdict(a, now, idle) {
                a.close(why);
            }
        }
    }
}

/// Whether one connection should close now, and why.
fn verdict(a: &Activity, now: Instant, idle: Duration) -> Option<Close> {
    if a.closing().is_some() {
        return None;
    }
    if a.unsent.load(Relaxed) > 0 {
        // replies wait for the peer to read them
        return (a.quiet_tx(now) >= idle).then_some(Close::Stalled);
    }
    if a.in_flight.load(Relaxed) > 0 || a.waiting.load(Relaxed) {
        return None; // the service, or our budget, is what it waits for
    }
    if a.quiet(now) < idle {
        return None;
    }
    Some(if a.partial.load(Relaxed) { Close::Stalled } else { Close::Idle })
}
