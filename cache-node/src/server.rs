//! The TCP side, shaped like memcached's: one acceptor, `-t` worker threads,
//! each running its own single-threaded tokio runtime (its own epoll), and
//! connections handed to workers round-robin. A connection lives on one
//! thread for its whole life, so serving a request never needs a cross-thread
//! wake-up; a slow or stuck peer only ever blocks its own task.
//!
//! Shutdown: the acceptor, each worker thread and each connection hold a
//! `daemon::Shutdown` token; on the stop broadcast the acceptor stops,
//! connections finish the batch they are in, and workers cut whatever is
//! left after [`DRAIN`]. The node's `daemon::Drain` waits for all tokens.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use daemon::Shutdown;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::node::Node;
use crate::session::{Progress, Session};

const READ_BUF: usize = 16 * 1024;
/// Output buffers that grew past this (a huge multi-get) are not kept.
const KEEP_OUT: usize = 256 * 1024;
/// How long shutdown waits for connections to finish their current batch.
const DRAIN: Duration = Duration::from_secs(5);

type NewConn = (std::net::TcpStream, OwnedSemaphorePermit);

/// Starts a worker thread; it finishes (and signals `done`) after shutdown
/// once its connections have drained.
fn worker(i: usize, node: Arc<Node>, shutdown: Shutdown) -> std::io::Result<(mpsc::UnboundedSender<NewConn>, oneshot::Receiver<()>)> {
    let (tx, mut rx) = mpsc::unbounded_channel::<NewConn>();
    let (done_tx, done) = oneshot::channel();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new().name(format!("cache-worker-{i}")).spawn(move || {
        rt.block_on(async move {
            let mut conns = JoinSet::new();
            let mut stop = shutdown.clone();
            loop {
                tokio::select! {
                    c = rx.recv() => match c {
                        Some((s, permit)) => {
                            let node = node.clone();
                            let rx = shutdown.clone();
                            conns.spawn(async move {
                                if let Ok(stream) = TcpStream::from_std(s) {
                                    if let Err(e) = connection(stream, node.clone(), rx).await {
                                        tracing::debug!("connection: {e}");
                                    }
                                }
                                node.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
                                drop(permit);
                            });
                        }
                        None => break,
                    },
                    _ = stop.recv() => break,
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
            let _ = tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
            conns.abort_all();
        });
        let _ = done_tx.send(());
    })?;
    Ok((tx, done))
}

/// Accept until `shutdown`, dealing connections to the worker threads; returns
/// once the workers have drained.
pub async fn serve(listener: TcpListener, node: Arc<Node>, mut shutdown: Shutdown) {
    let limit = Arc::new(Semaphore::new(node.config.max_conns));
    let mut workers = Vec::new();
    let mut dones = Vec::new();
    for i in 0..node.config.threads.max(1) {
        match worker(i, node.clone(), shutdown.clone()) {
            Ok((tx, done)) => {
                workers.push(tx);
                dones.push(done);
            }
            Err(e) => tracing::error!("cannot start worker thread: {e}"),
        }
    }
    let mut next = 0usize;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.recv() => break,
        };
        let (stream, _) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            // memcached's answer when -c is reached.
            node.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut s = stream;
                let _ = s.write_all(b"ERROR Too many open connections\r\n").await;
            });
            continue;
        };
        let Ok(std_stream) = stream.into_std() else { continue };
        node.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
        node.stats.total_connections.fetch_add(1, Ordering::Relaxed);
        if workers.is_empty() {
            break;
        }
        next = (next + 1) % workers.len();
        if let Err(mpsc::error::SendError((_, permit))) = workers[next].send((std_stream, permit)) {
            node.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        }
    }
    drop(listener);
    drop(workers);
    for d in dones {
        let _ = d.await;
    }
}

async fn connection(mut stream: TcpStream, node: Arc<Node>, mut shutdown: Shutdown) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut session = Session::new(node);
    let mut input = BytesMut::with_capacity(READ_BUF);
    let mut out = Vec::with_capacity(READ_BUF);
    loop {
        if input.capacity() - input.len() < 1024 {
            input.reserve(READ_BUF);
        }
        let n = tokio::select! {
            biased;
            r = stream.read_buf(&mut input) => r?,
            _ = shutdown.recv() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
        loop {
            let progress = session.process(&mut input, &mut out);
            if !out.is_empty() {
                stream.write_all(&out).await?;
                out.clear();
                if out.capacity() > KEEP_OUT {
                    out = Vec::with_capacity(READ_BUF);
                }
            }
            if progress == Progress::Close {
                let _ = stream.shutdown().await;
                return Ok(());
            }
            if !session.pending() {
                break;
            }
        }
        if input.is_empty() && input.capacity() > KEEP_OUT {
            input = BytesMut::with_capacity(READ_BUF);
        }
    }
}
