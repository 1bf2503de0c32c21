//! The TCP side: a bounded accept loop and one task per connection, in the
//! mini-redis style. Each connection owns its buffers and a [`Session`]; a
//! slow or stuck peer only ever blocks its own task.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::node::Node;
use crate::session::{Progress, Session};

const READ_BUF: usize = 16 * 1024;
/// Output buffers that grew past this (a huge multi-get) are not kept.
const KEEP_OUT: usize = 256 * 1024;
/// How long shutdown waits for connections to finish their current batch.
const DRAIN: Duration = Duration::from_secs(5);

pub async fn serve(listener: TcpListener, node: Arc<Node>, mut shutdown: watch::Receiver<bool>) {
    let limit = Arc::new(Semaphore::new(node.config.max_conns));
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
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
        let node = node.clone();
        let rx = shutdown.clone();
        conns.spawn(async move {
            node.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
            node.stats.total_connections.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = connection(stream, node.clone(), rx).await {
                tracing::debug!("connection: {e}");
            }
            node.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
}

async fn connection(mut stream: TcpStream, node: Arc<Node>, mut shutdown: watch::Receiver<bool>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut session = Session::new(node);
    let mut input = BytesMut::with_capacity(READ_BUF);
    let mut out = Vec::with_capacity(READ_BUF);
    loop {
        if input.capacity() - input.len() < 1024 {
            input.reserve(READ_BUF);
        }
        let n = tokio::select! {
            r = stream.read_buf(&mut input) => r?,
            _ = shutdown.changed() => return Ok(()),
        };
        if n == 0 {
            return Ok(());
        }
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
        if input.is_empty() && input.capacity() > KEEP_OUT {
            input = BytesMut::with_capacity(READ_BUF);
        }
    }
}
