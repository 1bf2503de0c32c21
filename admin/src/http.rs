//! Routes, who may call them, and the read-admit-apply path of every change.

use crate::auth::{self, Auth};
use crate::backend::{AdminBackend, AdminError};
use crate::limits::{self, ServerLimits};
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;
use volume::options::check_node_addr;
use volume::{CacheConfig, ConfigUpdate};

#[derive(Clone)]
struct App {
    backend: Arc<dyn AdminBackend>,
    auth: Arc<Auth>,
    /// reads (GET, HEAD) need no token: the listener is on loopback
    reads_open: bool,
    /// Serialises read-modify-write changes made through this gateway;
    /// changes through other gateways are caught by the epoch compare-and-set.
    changing: Arc<tokio::sync::Mutex<()>>,
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = json(code, &self.to_json());
        if code == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"imca\""));
        }
        r
    }
}

fn json<T: Serialize>(code: StatusCode, body: &T) -> Response {
    match serde_json::to_vec_pretty(body) {
        Ok(mut v) => {
            v.push(b'\n');
            (code, [(header::CONTENT_TYPE, "application/json")], v).into_response()
        }
        Err(e) => AdminError::Internal(format!("cannot encode reply: {e}")).into_response(),
    }
}

type Reply = Result<Response, AdminError>;

/// The admin API's routes over `backend`. Changes need `auth`'s token
/// always; reads need it unless `reads_open` (a loopback listener); see
/// [`crate::auth`]. `/healthz` is always open. Bodies are bounded by `limits`.
pub fn router(backend: Arc<dyn AdminBackend>, auth: Auth, reads_open: bool, limits: ServerLimits) -> Router {
    let app = App { backend, auth: Arc::new(auth), reads_open, changing: Arc::default() };
    let api = Router::new()
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status))
        .route("/api/v1/config", get(get_config).put(put_config))
        .route("/api/v1/options", get(options))
        .route("/api/v1/cache-nodes", get(list_nodes).post(add_node).delete(remove_node))
        .route("/api/v1/cache/flush", post(flush))
        .route("/api/v1/openapi.json", get(openapi))
        .fallback(not_found)
        // the last layer runs first: who is asking, then (only then) the body
        .route_layer(middleware::from_fn_with_state(limits, limits::bounded_body))
        .route_layer(middleware::from_fn_with_state(app.clone(), require_token));
    Router::new().route("/healthz", get(healthz)).merge(api).with_state(app)
}

/// Serve the admin API on `listener` until `shutdown` resolves, under the
/// default [`ServerLimits`]. Refuses to start on a non-loopback address
/// without a token.
pub async fn serve<F>(listener: TcpListener, backend: Arc<dyn AdminBackend>, auth: Auth, shutdown: F) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    serve_with(listener, backend, auth, ServerLimits::default(), shutdown).await
}

/// [`serve`] under other limits (tests use short timeouts and small caps).
pub async fn serve_with<F>(
    listener: TcpListener,
    backend: Arc<dyn AdminBackend>,
    auth: Auth,
    limits: ServerLimits,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let addr = listener.local_addr()?;
    auth::check_exposure(addr, auth.token()).map_err(std::io::Error::other)?;
    let reads_open = addr.ip().is_loopback();
    if auth.token().is_none() {
        tracing::warn!(%addr, "admin API is read-only: no admin token (--admin-token-file FILE or ${})", auth::TOKEN_ENV);
    }
    tracing::info!(%addr, token = auth.token().is_some(), token_file = ?auth.file(), reads_open,
        max_connections = limits.max_connections, "admin API listening");
    crate::server::run(listener, router(backend, auth, reads_open, limits), limits, shutdown).await
}

/// Changes always need the token; reads only off loopback.
async fn require_token(State(app): State<App>, req: Request, next: Next) -> Response {
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if !(read && app.reads_open) {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if let Err(why) = app.auth.check(given) {
            tracing::debug!(method = %req.method(), path = req.uri().path(), "admin API: refused without the token");
            return AdminError::Unauthorized(why).into_response();
        }
    }
    next.run(req).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn not_found(req: Request) -> Response {
    AdminError::NotFound(format!("no such endpoint: {} {} (see /api/v1/openapi.json)", req.method(), req.uri().path()))
        .into_response()
}

async fn metrics(State(app): State<App>) -> Reply {
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&app.backend.metrics())
        .map_err(|e| AdminError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response())
}

async fn status(State(app): State<App>) -> Reply {
    Ok(json(StatusCode::OK, &app.backend.status().await?))
}

async fn get_config(State(app): State<App>) -> Reply {
    Ok(json(StatusCode::OK, &app.backend.config().await?))
}

async fn options() -> Response {
    json(StatusCode::OK, &volume::options::table())
}

async fn openapi() -> Response {
    json(StatusCode::OK, &crate::openapi::document())
}

async fn put_config(State(app): State<App>, body: Bytes) -> Reply {
    let update = parse_update(&body)?;
    let cfg = change(&app, |cur| Ok(update.merge(cur)?)).await?;
    Ok(json(StatusCode::OK, &cfg))
}

async fn list_nodes(State(app): State<App>) -> Reply {
    Ok(json(StatusCode::OK, &app.backend.cache_nodes().await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRequest {
    addr: String,
}

type QueryMap = Query<std::collections::HashMap<String, String>>;

fn node_request(query: &QueryMap, body: &[u8]) -> Result<String, AdminError> {
    if let Some(a) = query.get("addr") {
        return Ok(a.clone());
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(AdminError::bad("addr", "expected a JSON body {\"addr\": \"host:port\"} (or ?addr=host:port)"));
    }
    serde_json::from_slice::<NodeRequest>(body)
        .map(|r| r.addr)
        .map_err(|e| AdminError::bad("addr", format!("invalid request: {e}")))
}

async fn add_node(State(app): State<App>, query: QueryMap, body: Bytes) -> Reply {
    let addr = node_request(&query, &body)?;
    check_node_addr(&addr)?;
    let cfg = change(&app, |cur| {
        if cur.nodes.contains(&addr) {
            return Err(AdminError::Conflict(format!("cache node {addr} is already in the pool")));
        }
        let mut next = cur.clone();
        // re-admitting a fenced node by hand: the new epoch makes whatever
        // it still holds unreadable
        next.fenced.retain(|n| *n != addr);
        next.nodes.push(addr.clone());
        Ok(next)
    })
    .await?;
    Ok(json(StatusCode::CREATED, &cfg))
}

async fn remove_node(State(app): State<App>, query: QueryMap, body: Bytes) -> Reply {
    let addr = node_request(&query, &body)?;
    let cfg = change(&app, |cur| {
        if !cur.nodes.contains(&addr) && !cur.fenced.contains(&addr) {
            return Err(AdminError::NotFound(format!("cache node {addr} is not in the pool {:?}", cur.nodes)));
        }
        let mut next = cur.clone();
        next.nodes.retain(|n| *n != addr);
        next.fenced.retain(|n| *n != addr);
        Ok(next)
    })
    .await?;
    Ok(json(StatusCode::OK, &cfg))
}

async fn flush(State(app): State<App>) -> Reply {
    let report = app.backend.flush().await?;
    tracing::info!(nodes = report.nodes.len(), "bank flushed through the admin API");
    Ok(json(StatusCode::OK, &report))
}

/// A `PUT /api/v1/config` body: unknown fields refused, and named ("unknown
/// field `blocksize`, expected one of ...").
pub fn parse_update(body: &[u8]) -> Result<ConfigUpdate, AdminError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(AdminError::BadRequest { field: None, message: "empty body: expected a JSON object".into() });
    }
    serde_json::from_slice(body).map_err(|e| AdminError::BadRequest {
        field: unknown_field(&e.to_string()),
        message: format!("invalid config: {e}"),
    })
}

fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Read the current config, compute the proposed one, have the control
/// plane admit it (all of it validated, new nodes probed), and only then
/// hand it to the backend: a refused change has touched nothing. A change
/// that changes nothing keeps the epoch.
async fn change(
    app: &App,
    f: impl FnOnce(&CacheConfig) -> Result<CacheConfig, AdminError>,
) -> Result<CacheConfig, AdminError> {
    let _one_at_a_time = app.changing.lock().await;
    let cur = app.backend.config().await?;
    let next = f(&cur)?;
    let limits = app.backend.limits(&next.nodes).await;
    let Some(next) = volume::change::admit(&cur, next, &limits).await? else {
        return Ok(cur);
    };
    let installed = app.backend.apply_config(next).await?;
    tracing::info!(epoch = installed.epoch, block_size = installed.block_size, placement = ?installed.placement,
        nodes = ?installed.nodes, "volume cache config changed through the admin API");
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_refused_and_named() {
        let e = parse_update(br#"{"blocksize": 4096}"#).unwrap_err();
        assert_eq!(e, AdminError::BadRequest { field: Some("blocksize".into()), message: e.to_string() });
        assert!(e.to_string().contains("blocksize"));
        let e = parse_update(br#"{"placement": "random"}"#).unwrap_err();
        assert!(e.to_string().contains("random"), "{e}");
        assert!(parse_update(b"  ").is_err());
        assert_eq!(parse_update(br#"{"block_size": 4096}"#).unwrap().block_size, Some(4096));
    }
}
