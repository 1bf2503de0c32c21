//! One established server connection: a reader that admits requests only
//! as budget allows, a task per request, and a writer.
//!
//! ```text
//!  reader:   in-flight slot ─ frame (its bytes reserved) ─ reply reserved (service's hint) ─ spawn
//!  request:  service.handle ─ request bytes released ─ reply trued to its size ─ queued
//!  writer:   written ─ reply bytes and in-flight slot released
//! ```
//!
//! A client that stops reading its replies therefore stops being read
//! itself once its budget or its in-flight slots are spent; the sweeper
//! closes it when its replies have not moved for the idle timeout.

use super::activity::{Activity, Progress};
use super::budget::{Budget, Reservation};
use super::frame::{self, FrameReader, Hello, ReadEnd};
use super::shared::Shared;
use super::stats::Close;
use super::HEADER_LEN;
use crate::Message;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// Reserved per reply beyond the service's hint (heads are small; a larger
/// one grows its reservation when it is known).
const HEAD_ALLOWANCE: usize = 4 * 1024;

/// A socket past a successful hello, holding a connection slot.
pub(super) struct Established {
    pub stream: super::tls::Stream,
    pub peer: SocketAddr,
    /// the client's hello (what it accepts)
    pub hello: Hello,
    pub slot: OwnedSemaphorePermit,
}

/// A request from its arrival until its reply is written (or dropped).
struct InFlight {
    act: Arc<Activity>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.act.in_flight.fetch_sub(1, Relaxed);
    }
}

/// What a queued reply holds until the writer has handed it to the socket.
struct Unsent {
    _bytes: Reservation,
    request: InFlight,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        self.request.act.unsent.fetch_sub(1, Relaxed);
    }
}

type Queue = mpsc::Sender<(u64, Message, Unsent)>;

pub(super) async fn serve(est: Established, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let Established { stream, peer, hello, slot: _slot } = est;
    let opts = &shared.opts;
    let act = Activity::new();
    let _listed = shared.register(act.clone());
    let (rd, wr) = stream.into_split();
    let in_flight_max = opts.max_in_flight.max(1);
    let (tx, rx) = mpsc::channel(in_flight_max);
    let mut writer = tokio::spawn(frame::write_frames(Progress { inner: wr, act: act.clone() }, rx));
    let in_flight = Arc::new(Semaphore::new(in_flight_max));
    let budget = Budget::new(shared.pool.clone(), opts.conn_memory);
    let mut frames = FrameReader::budgeted(rd, opts.max_frame, budget.clone(), act.clone());
    // Replies never exceed what the client said it accepts.
    let reply_limit = hello.max_frame as usize;
    let mut tasks = JoinSet::new();

    let end = loop {
        // Take a slot before reading on: a client that pipelines without
        // bound waits in its socket buffer, not in our memory.
        let slot = tokio::select! {
            p = in_flight.clone().acquire_owned() => p.expect("semaphore never closed"),
            why = act.closed() => break End::Closed(why),
            _ = stop.wait_for(|s| *s) => break End::Closed(Close::Shutdown),
        };
        let (id, msg, request_bytes) = tokio::select! {
            r = frames.next() => match r {
                Ok(f) => f,
                Err(e) => break End::Read(e),
            },
            why = act.closed() => break End::Closed(why),
            _ = stop.wait_for(|s| *s) => break End::Closed(Close::Shutdown),
        };
        let hint = shared.svc.reply_size_hint(&msg).min(reply_limit);
        let reply_bytes = tokio::select! {
            r = async {
                let _waiting = act.waiting_for_budget();
                budget.reserve(HEADER_LEN + HEAD_ALLOWANCE + hint).await
            } => r,
            why = act.closed() => break End::Closed(why),
            _ = stop.wait_for(|s| *s) => break End::Closed(Close::Shutdown),
        };
        act.in_flight.fetch_add(1, Relaxed);
        let request = InFlight { act: act.clone(), _slot: slot };
        let (svc, tx) = (shared.svc.clone(), tx.clone());
        tasks.spawn(async move {
            let reply = svc.handle(msg).await;
            drop(request_bytes);
            answer(tx, id, reply, reply_bytes, request, reply_limit, peer).await;
        });
        while tasks.try_join_next().is_some() {}
    };

    let why = act.closing().unwrap_or(match &end {
        End::Closed(why) => *why,
        End::Read(ReadEnd::Closed | ReadEnd::MidFrame(_)) => Close::Peer,
        End::Read(ReadEnd::Invalid(_)) => Close::Invalid,
        End::Read(ReadEnd::Io(_)) => Close::ReadError,
    });
    log_end(peer, why, &end);
    // Finish what was accepted and let the writer flush and close — unless
    // the connection is being closed on purpose (idle, evicted, stalled: a
    // stalled peer would never let the writer finish).
    drop(tx);
    let aborted = tokio::select! {
        _ = async {
            while tasks.join_next().await.is_some() {}
            let _ = (&mut writer).await;
        } => false,
        _ = act.closed() => true,
    };
    if aborted {
        tasks.abort_all();
        writer.abort();
    }
    shared.stats().count(act.closing().unwrap_or(why));
}

enum End {
    Closed(Close),
    Read(ReadEnd),
}

/// Queue one reply with the bytes it holds, or close the connection if the
/// client cannot take it.
async fn answer(
    tx: Queue,
    id: u64,
    reply: Message,
    mut bytes: Reservation,
    request: InFlight,
    reply_limit: usize,
    peer: SocketAddr,
) {
    let body = reply.head.len() + reply.bulk.len();
    if body > reply_limit {
        if request.act.close(Close::Oversized) {
            tracing::warn!(%peer, "a reply of {body} bytes exceeds the {reply_limit} the client accepts: closing the connection");
        }
        return;
    }
    bytes.resize(HEADER_LEN + body);
    request.act.queue_reply();
    let _ = tx.send((id, reply, Unsent { _bytes: bytes, request })).await;
}

fn log_end(peer: SocketAddr, why: Close, end: &End) {
    match (why, end) {
        (Close::Idle | Close::Shutdown | Close::Peer, End::Read(ReadEnd::Closed) | End::Closed(_)) => {
            tracing::debug!(%peer, "storage RPC connection ended: {}", why.label())
        }
        (Close::Evicted, _) => {
            tracing::info!(%peer, "closed a quiet storage RPC connection: every connection slot was taken")
        }
        (Close::Stalled, _) => tracing::warn!(
            %peer,
            "dropping storage RPC connection: it stopped sending its frame or reading its replies for the idle timeout"
        ),
        (_, End::Read(e)) => tracing::warn!(%peer, "dropping storage RPC connection: {e}"),
        (_, End::Closed(_)) => tracing::debug!(%peer, "storage RPC connection ended: {}", why.label()),
    }
}
