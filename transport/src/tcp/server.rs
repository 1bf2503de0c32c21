//! The server end: a bounded accept loop (mini-redis style) handing each
//! request to the [`RpcService`] in its own task.

use super::frame::{self, hello, parse_hello};
use super::{DEFAULT_MAX_FRAME, PROTOCOL_VERSION};
use crate::{Message, RpcService};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;

#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Connections beyond this wait in the listen backlog.
    pub max_connections: usize,
    /// Largest request frame accepted; a bigger one drops the connection.
    pub max_frame: usize,
    /// Requests of one connection being served at once (back-pressure on a
    /// client that pipelines without bound).
    pub max_in_flight: usize,
    /// A client that does not complete the hello within this is dropped.
    pub handshake_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_connections: 1024,
            max_frame: DEFAULT_MAX_FRAME,
            max_in_flight: 256,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// Serve `service` on `listener` until `shutdown` completes; then stop
/// accepting, stop reading new requests, and let in-flight ones finish.
pub async fn serve(
    listener: TcpListener,
    service: Arc<dyn RpcService>,
    opts: ServerOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limit = Arc::new(Semaphore::new(opts.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = limit.clone().acquire_owned() => p.expect("semaphore never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off briefly rather than spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (svc, opts, stop) = (service.clone(), opts.clone(), stop_rx.clone());
        conns.spawn(async move {
            serve_conn(stream, peer, svc, opts, stop).await;
            drop(permit);
        });
        // Reap finished connections so the set does not grow without bound.
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while conns.join_next().await.is_some() {}
    Ok(())
}

async fn serve_conn(
    mut stream: TcpStream,
    peer: SocketAddr,
    svc: Arc<dyn RpcService>,
    opts: ServerOptions,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    match tokio::time::timeout(opts.handshake_timeout, accept_hello(&mut stream)).await {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            tracing::warn!(%peer, "storage RPC handshake refused: {why}");
            return;
        }
        Err(_) => {
            tracing::warn!(%peer, "storage RPC handshake timed out");
            return;
        }
    }
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<(u64, Message)>(opts.max_in_flight);
    let writer = tokio::spawn(frame::write_frames(wr, rx));
    let in_flight = Arc::new(Semaphore::new(opts.max_in_flight));
    let mut tasks = JoinSet::new();

    let mut frames = frame::FrameReader::new(rd, opts.max_frame);
    let why = loop {
        // Take a slot before reading on: a client that pipelines without
        // bound waits in its socket buffer, not in our memory.
        let permit = tokio::select! {
            p = in_flight.clone().acquire_owned() => p.expect("semaphore never closed"),
            _ = stop.wait_for(|s| *s) => break "server shutting down".to_string(),
        };
        let (id, msg) = tokio::select! {
            r = frames.next() => match r {
                Ok(f) => f,
                Err(why) => break why,
            },
            _ = stop.wait_for(|s| *s) => break "server shutting down".to_string(),
        };
        let (svc, tx) = (svc.clone(), tx.clone());
        tasks.spawn(async move {
            let reply = svc.handle(msg).await;
            let _ = tx.send((id, reply)).await;
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    };
    if why.starts_with("invalid") || why.contains("mid-frame") || why.starts_with("read error") {
        tracing::warn!(%peer, "dropping storage RPC connection: {why}");
    } else {
        tracing::debug!(%peer, "storage RPC connection ended: {why}");
    }
    // Finish what was accepted, then let the writer flush and close.
    while tasks.join_next().await.is_some() {}
    drop(tx);
    let _ = writer.await;
}

async fn accept_hello(s: &mut TcpStream) -> Result<(), String> {
    let mut h = [0u8; 8];
    s.read_exact(&mut h).await.map_err(|e| format!("reading hello: {e}"))?;
    let (version, _) = parse_hello(&h)?;
    if version != PROTOCOL_VERSION {
        let _ = s.write_all(&hello(1)).await;
        return Err(format!("client speaks protocol version {version}, this server speaks {PROTOCOL_VERSION}"));
    }
    s.write_all(&hello(0)).await.map_err(|e| format!("writing hello: {e}"))
}
