//! The admin API's connection server: HTTP/1.1 (hyper) under
//! [`ServerLimits`], in place of `axum::serve`, which sets no header
//! timeout and no connection cap.
//!
//! ```text
//!  accept ─> who (daemon::peer: local uid or remote IP) ─> crowd (daemon::crowd):
//!     ├─ admitted (maybe shedding the oldest connection with no request head in,
//!     │            of the peer holding the most) ─> task: hyper http1 conn
//!     │            (whole-head timeout, head size, age limit) ─> axum Router (auth, body limit, routes)
//!     └─ every connection of the peer, or of the server, is mid-request ─> "503 too many connections", closed
//! ```
//!
//! A connection counts as unsettled (sheddable) from its accept until its
//! request head is in, and again from its reply until its next head: what
//! an idle or trickling connection holds, a real client's next connection
//! can take. One local user's flood sheds its own connections (per-uid
//! cap), so the operator's `imca ctl` is served however many come and go.
//! Refusing at once rather than leaving connections in the listen backlog
//! keeps the kernel's queue empty and tells a real client why. HTTP/2 is
//! not served: the API's clients speak HTTP/1.1, and it is one less parser
//! facing the network.

use crate::limits::ServerLimits;
use axum::Router;
use daemon::{Crowd, CrowdLimits, Peer, Ticket};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

/// What a connection over the cap reads before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n\
Content-Length: 91\r\n\r\n{\"error\":\"unavailable\",\"message\":\"too many connections to the admin API; try again later\"}\n";
/// After shutdown (or past its age), how long a connection gets to finish
/// its request.
const DRAIN: Duration = Duration::from_secs(5);
/// Pause after a failed accept (out of fds: do not spin).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serve `app` on `listener` until `shutdown`, then let open connections
/// finish their current request (up to [`DRAIN`]).
pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let crowd = Crowd::new(CrowdLimits {
        max: limits.max_connections,
        per_peer: limits.max_connections_per_peer,
        max_unsettled: limits.max_connections,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    // every connection task holds a clone: `recv` is None once all have ended
    let (running, mut all_ended) = mpsc::channel::<()>(1);
    let mut refused = RefusalLog::default();
    let local = listener.local_addr()?;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "admin API: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let who = daemon::peer::identify(stream.local_addr().unwrap_or(local), peer);
        let ticket = match crowd.admit(who) {
            Ok(t) => Arc::new(t),
            Err(why) => {
                // One non-blocking write into an empty socket buffer; then closed.
                let _ = stream.try_write(BUSY);
                refused.note(who, why, &limits);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let svc = Settling { inner: TowerToHyperService::new(app.clone()), ticket: ticket.clone() };
        let conn = connection(limits, TokioIo::new(stream), svc);
        let mut stop = stop_rx.clone();
        let running = running.clone();
        tokio::spawn(async move {
            let _running = running;
            tokio::pin!(conn);
            // At shutdown or past its age a connection finishes the request
            // in hand (graceful), then gets DRAIN more before it is dropped.
            let deadline = tokio::time::sleep(limits.max_connection_age);
            tokio::pin!(deadline);
            let mut stopping = false;
            loop {
                tokio::select! {
                    r = conn.as_mut() => {
                        // header timeouts, resets, malformed requests: the client's business
                        if let Err(e) = r {
                            tracing::debug!(%peer, error = %e, "admin API connection ended");
                        }
                        return;
                    }
                    // with no request in hand: dropping it cuts nothing
                    _ = ticket.shed() => {
                        tracing::debug!(%peer, %who, "admin API connection shed: no request head, and its place was wanted");
                        return;
                    }
                    _ = stop.wait_for(|s| *s), if !stopping => {}
                    _ = deadline.as_mut() => {
                        if stopping {
                            tracing::debug!(%peer, "admin API connection dropped: did not finish in time");
                            return;
                        }
                    }
                }
                stopping = true;
                conn.as_mut().graceful_shutdown();
                deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN);
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(running);
    let _ = tokio::time::timeout(DRAIN, all_ended.recv()).await;
    Ok(())
}

/// The router, telling the crowd when a connection has a request in hand
/// (settled: never shed) and when it is back to waiting for a head.
struct Settling {
    inner: TowerToHyperService<Router>,
    ticket: Arc<Ticket>,
}

type Inner = TowerToHyperService<Router>;
type Req = hyper::Request<Incoming>;

impl hyper::service::Service<Req> for Settling {
    type Response = <Inner as hyper::service::Service<Req>>::Response;
    type Error = <Inner as hyper::service::Service<Req>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, req: Req) -> Self::Future {
        self.ticket.settle();
        let reply = self.inner.call(req);
        let ticket = self.ticket.clone();
        Box::pin(async move {
            let r = reply.await;
            // the reply's body is in memory and goes out now; the
            // connection is the newest waiter, so the last to be shed
            ticket.unsettle();
            r
        })
    }
}

type Service = Settling;

/// One HTTP/1.1 connection under `limits`.
fn connection(
    limits: ServerLimits,
    io: TokioIo<tokio::net::TcpStream>,
    svc: Service,
) -> hyper::server::conn::http1::Connection<TokioIo<tokio::net::TcpStream>, Service> {
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers)
        .max_header_size(limits.max_header_bytes)
        // room for one full head; bodies stream through it
        .max_buf_size(limits.max_header_bytes.max(8192) + 8192)
        .serve_connection(io, svc)
}

/// Connections refused over the cap, logged at most once per
/// [`RefusalLog::EVERY`] so a flood cannot flood the log too.
#[derive(Default)]
struct RefusalLog {
    since: Option<Instant>,
    count: u64,
}

impl RefusalLog {
    const EVERY: Duration = Duration::from_secs(10);

    fn note(&mut self, peer: Peer, why: daemon::Refused, limits: &ServerLimits) {
        self.count += 1;
        if self.since.is_none_or(|t| t.elapsed() >= Self::EVERY) {
            let (cap, whose) = match why {
                daemon::Refused::PeerFull => (limits.max_connections_per_peer, "this peer's"),
                daemon::Refused::Full => (limits.max_connections, "the server's"),
            };
            tracing::warn!(%peer, refused = self.count, cap,
                "admin API: {whose} connection cap reached with every connection mid-request; refusing new ones until some end");
            self.since = Some(Instant::now());
            self.count = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_busy_reply_is_well_formed() {
        let r = crate::client::parse_response(super::BUSY).unwrap();
        assert_eq!(r.status, 503);
        let len: usize = r.header("content-length").unwrap().parse().unwrap();
        assert_eq!(len, super::BUSY.len() - super::BUSY.windows(4).position(|w| w == b"\r\n\r\n").unwrap() - 4);
        assert_eq!(r.json().unwrap()["error"], "unavailable");
    }
}
