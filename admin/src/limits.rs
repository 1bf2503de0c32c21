//! What one client can make the admin server hold: connections, time, bytes.
//!
//! Without these an ordinary local user kept ~20k idle connections open on
//! a gateway's admin port (470–620 MB, never given back), and 64 trickling
//! connections kept the operator out (503) for as long as they came. Every
//! limit here bounds one resource a peer can hold; a peer is a local user
//! (by uid) or a remote host (by IP): see `daemon::peer`. [`crate::serve`]
//! uses the defaults, tests pass shorter ones to [`crate::serve_with`].

use crate::backend::AdminError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use std::time::Duration;

/// Connections served at once. The API's real clients are `imca ctl` (one
/// connection per command), a Prometheus scraper and a dashboard or two.
/// When all are taken, a newcomer sheds the oldest connection that has not
/// sent a complete request head (`daemon::crowd`) rather than being refused.
pub const MAX_CONNECTIONS: usize = 64;
/// Connections one peer (a local uid, a remote IP) holds at once; its next
/// one sheds its own oldest that has not sent a head.
pub const MAX_CONNECTIONS_PER_PEER: usize = 16;
/// A request's whole head (not each byte of it) must arrive within this,
/// and so must the next one on a kept-alive connection: an idle or
/// slowloris connection is closed then. `imca ctl` sends its head at once.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
/// Request line plus headers (hyper answers 431 beyond it).
pub const MAX_HEADER_BYTES: usize = 16 << 10;
/// Headers per request.
pub const MAX_HEADERS: usize = 32;
/// A request body: the largest real one, a config with a long node list, is
/// a few KiB.
pub const MAX_BODY_BYTES: usize = 64 << 10;
/// A request body must arrive within this once its head is in.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection is closed after this long whatever it is doing (a client
/// that never reads its replies holds its slot no longer).
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(600);

/// The admin server's limits; [`Default`] is the constants above.
#[derive(Clone, Copy, Debug)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub header_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    pub max_connection_age: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: MAX_CONNECTIONS_PER_PEER,
            header_timeout: HEADER_TIMEOUT,
            max_header_bytes: MAX_HEADER_BYTES,
            max_headers: MAX_HEADERS,
            max_body_bytes: MAX_BODY_BYTES,
            body_timeout: BODY_TIMEOUT,
            max_connection_age: MAX_CONNECTION_AGE,
        }
    }
}

/// Middleware: read the whole body, at most `max_body_bytes` (413 beyond,
/// before reading a byte when Content-Length says so) within `body_timeout`
/// (408), then hand the request on. Runs after authentication, so nobody
/// without the token makes the server buffer anything.
pub(crate) async fn bounded_body(State(limits): State<ServerLimits>, req: Request, next: Next) -> Response {
    let max = limits.max_body_bytes;
    let too_large = || AdminError::TooLarge(format!("request body larger than {max} bytes")).into_response();
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if buf.len() + chunk.len() > max {
                return Ok(None);
            }
            buf.extend_from_slice(&chunk);
        }
        Ok::<_, axum::Error>(Some(buf))
    };
    match tokio::time::timeout(limits.body_timeout, read).await {
        Err(_) => AdminError::Timeout(format!("request body not received within {:?}", limits.body_timeout)).into_response(),
        Ok(Err(e)) => AdminError::BadRequest { field: None, message: format!("cannot read the request body: {e}") }
            .into_response(),
        Ok(Ok(None)) => too_large(),
        Ok(Ok(Some(b))) => next.run(Request::from_parts(parts, Body::from(b))).await,
    }
}
