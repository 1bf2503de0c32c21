//! The socket side (TCP, or a UNIX socket with `-s`: `listen.rs`), shaped like memcached's: one acceptor, `-t` worker threads,
//! each running its own single-threaded tokio runtime (its own epoll), and
//! connections handed to the worker of the CPU their packets arrive on
//! (`place.rs`; memcached deals round-robin). A connection lives on one
//! thread for its whole life, so serving a request never needs a cross-thread
//! wake-up; a slow or stuck peer only ever blocks its own task.
//!
//! Admission (`admission.rs`): the acceptor admits each connection through
//! the node's crowd (`-c`, per-peer and, with `-Y`, not-logged-in caps);
//! a connection not logged in is closed when shed or past the login
//! timeout (the acceptor's reaper), so idle sockets never hold the slots
//! the volume's gateways need.
//!
//! Shutdown: the acceptor, each worker thread and each connection hold a
//! `daemon::Shutdown` token; on the stop broadcast the acceptor stops,
//! connections finish the batch they are in, and the acceptor tells the
//! workers to cut whatever is left after [`DRAIN`]. The node's
//! `daemon::Drain` waits for all tokens.
//!
//! A worker's runtime has the I/O driver only: no timer wheel and no
//! signal or child-process driver, each of which costs a clock read or a
//! check on every `epoll_wait` round (issue 14's single-key profile). The
//! one timer a worker needed, the drain bound, is the acceptor's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use daemon::Shutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use daemon::Ticket;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::conns::{Conn, State};
use crate::listen::{Accepted, Listener};
use crate::node::Node;
use crate::out::Out;
use crate::place::{self, Live, Placement};
use crate::session::{Progress, Session};
use crate::watch::{self, Watcher};

const READ_BUF: usize = 16 * 1024;
/// Output buffers that grew past this (a huge multi-get) are not kept.
const KEEP_OUT: usize = 256 * 1024;
/// How long shutdown waits for connections to finish their current batch.
const DRAIN: Duration = Duration::from_secs(5);

/// A connection for a worker, with its place in the node's crowd (its `-c`
/// slot) and its count on the worker (both given back when it ends).
type NewConn = (Accepted, Ticket, Live);

/// Starts a worker thread; it finishes (and drops `done`) after shutdown
/// once its connections have drained, or once `cut` says the drain is
/// over. `listen_name` is the listener as `stats conns` shows it.
fn worker(
    i: usize,
    node: Arc<Node>,
    shutdown: Shutdown,
    listen_name: Arc<str>,
    mut cut: tokio::sync::watch::Receiver<()>,
    done: mpsc::Sender<()>,
) -> std::io::Result<mpsc::UnboundedSender<NewConn>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<NewConn>();
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    std::thread::Builder::new().name(format!("cache-worker-{i}")).spawn(move || {
        rt.block_on(async move {
            let mut conns = JoinSet::new();
            let mut stop = shutdown.clone();
            loop {
                tokio::select! {
                    c = rx.recv() => match c {
                        Some((s, ticket, live)) => {
                            let node = node.clone();
                            let rx = shutdown.clone();
                            let listen_name = listen_name.clone();
                            conns.spawn(async move {
                                if let Err(e) = start_connection(s, &node, rx, &listen_name, &ticket).await {
                                    tracing::debug!("connection: {e}");
                                }
                                node.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
                                drop((ticket, live));
                            });
                        }
                        None => break,
                    },
                    _ = stop.recv() => break,
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
            tokio::select! {
                _ = async { while conns.join_next().await.is_some() {} } => {}
                // a change or the acceptor gone: the drain is over
                _ = cut.changed() => {}
            }
            conns.abort_all();
        });
        drop(done);
    })?;
    Ok(tx)
}

/// Accept until `shutdown`, dealing connections to the worker threads; returns
/// once the workers have drained.
pub async fn serve(listener: Listener, node: Arc<Node>, mut shutdown: Shutdown) {
    // with -Y: connections past the login timeout are closed from here
    let login_timeout = node.config.auth.as_ref().map(|_| node.config.login_timeout);
    let mut reaper = tokio::time::interval(crate::admission::reap_every(node.config.login_timeout));
    reaper.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut watchful = crate::admission::Watchful::default();
    let limits = node.crowd.limits();
    let by_peer = login_timeout.is_some() || limits.per_peer < limits.max;
    let mut workers = Vec::new();
    // every worker holds a `done` sender: `recv` is `None` once all have ended
    let (done, mut all_done) = mpsc::channel::<()>(1);
    let (cut, cut_rx) = tokio::sync::watch::channel(());
    let listen_name: Arc<str> = listener.name().into();
    node.conns.set_listener(listener.raw_fd(), listen_name.to_string(), node.store.clock.now());
    for i in 0..node.config.threads.max(1) {
        match worker(i, node.clone(), shutdown.clone(), listen_name.clone(), cut_rx.clone(), done.clone()) {
            Ok(tx) => workers.push(tx),
            Err(e) => tracing::error!("cannot start worker thread: {e}"),
        }
    }
    drop(done);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let place = Arc::new(Placement::new(workers.len(), cpus));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.recv() => break,
            _ = reaper.tick(), if login_timeout.is_some() => {
                node.crowd.reap(node.config.login_timeout);
                watchful.check(&node.crowd);
                continue;
            }
        };
        let stream = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // without -Y and --peer-conn-limit every peer is one (no lookup)
        let peer = if by_peer { crate::admission::peer_of(&stream) } else { daemon::Peer::Uid(u32::MAX) };
        let Ok(ticket) = node.crowd.admit(peer) else {
            // memcached's answer when -c is reached (here also the peer's cap).
            node.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = match stream {
                    Accepted::Tcp(s) => refuse(TcpStream::from_std(s)).await,
                    Accepted::Unix(s) => refuse(UnixStream::from_std(s)).await,
                };
            });
            continue;
        };
        if login_timeout.is_none() {
            // nothing to prove without -Y: never shed, as memcached
            ticket.settle();
        }
        node.stats.curr_connections.fetch_add(1, Ordering::Relaxed);
        node.stats.total_connections.fetch_add(1, Ordering::Relaxed);
        if workers.is_empty() {
            break;
        }
        let cpu = match &stream {
            Accepted::Tcp(s) => place::incoming_cpu(std::os::fd::AsRawFd::as_raw_fd(s)),
            Accepted::Unix(_) => None,
        };
        let live = place.deal(cpu);
        let w = live.worker;
        if let Err(mpsc::error::SendError(c)) = workers[w].send((stream, ticket, live)) {
            node.stats.curr_connections.fetch_sub(1, Ordering::Relaxed);
            drop(c);
        }
    }
    drop(listener);
    drop(workers);
    if tokio::time::timeout(DRAIN, all_done.recv()).await.is_err() {
        cut.send_replace(());
        all_done.recv().await;
    }
}

/// memcached's answer when `-c` is reached.
async fn refuse<S: AsyncWrite + Unpin>(s: std::io::Result<S>) -> std::io::Result<()> {
    s?.write_all(b"ERROR Too many open connections\r\n").await
}

/// Takes an accepted socket onto this worker's runtime and serves it.
async fn start_connection(
    s: Accepted,
    node: &Arc<Node>,
    shutdown: Shutdown,
    listen_name: &str,
    ticket: &Ticket,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    match s {
        Accepted::Tcp(s) => {
            let stream = TcpStream::from_std(s)?;
            stream.set_nodelay(true)?;
            let (fd, peer) = (stream.as_raw_fd(), stream.peer_addr().ok());
            serve_listed(stream, fd, peer, node, shutdown, listen_name, ticket).await
        }
        Accepted::Unix(s) => {
            let stream = UnixStream::from_std(s)?;
            let fd = stream.as_raw_fd();
            serve_listed(stream, fd, None, node, shutdown, listen_name, ticket).await
        }
    }
}

/// Serves a connection while listing it for `stats conns` and telling
/// `watch connevents` of its start and end. `peer` is `None` on a UNIX socket.
async fn serve_listed<S>(
    stream: S,
    fd: i32,
    peer: Option<std::net::SocketAddr>,
    node: &Arc<Node>,
    shutdown: Shutdown,
    listen_name: &str,
    ticket: &Ticket,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // memcached has no peer address for a UNIX socket and prints `?:<AF 0>`
    let addr = peer.map_or_else(|| "?:<AF 0>".to_string(), |a| format!("tcp:{a}"));
    let conn = node.conns.open(fd, addr, listen_name.into(), node.store.clock.now());
    let log = &node.store.log;
    if log.on(watch::CONNEVENTS) {
        watch::log_conn(log, peer, None, fd);
    }
    let r = connection(stream, node.clone(), shutdown, conn, ticket).await;
    node.conns.close(fd);
    if log.on(watch::CONNEVENTS) {
        let reason = match &r {
            Ok(Ended::Normal) => "normal",
            Ok(Ended::Shutdown) => "shutdown",
            Ok(Ended::NotLoggedIn) => "idle_timeout",
            Err(_) => "error",
        };
        watch::log_conn(log, peer, Some(reason), fd);
    }
    r.map(|_| ())
}

/// How a connection ended (memcached's close reasons).
enum Ended {
    /// the peer closed, or asked to (`quit`)
    Normal,
    /// the node is stopping
    Shutdown,
    /// with -Y: shed, or past the login timeout, before logging in
    /// (memcached's nearest close reason is `idle_timeout`)
    NotLoggedIn,
}

async fn connection<S>(
    mut stream: S,
    node: Arc<Node>,
    mut shutdown: Shutdown,
    conn: Arc<Conn>,
    ticket: &Ticket,
) -> std::io::Result<Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut session = Session::new(node.clone());
    session.conn = Some(conn.clone());
    let mut input = BytesMut::with_capacity(READ_BUF);
    let mut out = Out::with_capacity(READ_BUF);
    // One stop future for the connection's life: building a fresh one per
    // read (registering with the broadcast each time) showed in profiles.
    let stop = shutdown.stopped();
    tokio::pin!(stop);
    // with -Y, until the login: the crowd may shed this connection
    let mut settled = session.logged_in();
    loop {
        if input.capacity() - input.len() < 1024 {
            input.reserve(READ_BUF);
        }
        let n = tokio::select! {
            biased;
            r = stream.read_buf(&mut input) => r?,
            _ = &mut stop => return Ok(Ended::Shutdown),
            _ = ticket.shed(), if !settled => return Ok(Ended::NotLoggedIn),
        };
        if n == 0 {
            return Ok(Ended::Normal);
        }
        conn.set_state(State::ParseCmd);
        loop {
            let progress = session.process_out(&mut input, &mut out);
            if !out.is_empty() {
                // A reply that fits the socket's buffer is written at once:
                // the state it leaves is shown already, or a client that got
                // the reply could still see conn_mwrite when it asks
                // (memcached changes state in the same thread, with no gap).
                conn.set_state(if out.len() <= SMALL_REPLY { after(&session, &input) } else { State::Mwrite });
                out.write_to(&mut stream).await?;
                out.clear(KEEP_OUT);
            }
            if let Some(w) = session.take_watcher() {
                conn.set_state(State::Watch);
                let r = stream_watch(&mut stream, &w, &mut shutdown).await;
                node.store.log.remove(&w);
                return r;
            }
            if !settled && session.logged_in() {
                // shed in the instant before: it holds no slot any more
                if !ticket.settle() {
                    return Ok(Ended::NotLoggedIn);
                }
                settled = true;
            }
            if progress == Progress::Close {
                let _ = stream.shutdown().await;
                return Ok(Ended::Normal);
            }
            if !session.pending() {
                break;
            }
        }
        conn.set_state(after(&session, &input));
        if input.is_empty() && input.capacity() > KEEP_OUT {
            input = BytesMut::with_capacity(READ_BUF);
        }
    }
}

/// Replies up to this size are taken whole by the socket (see `connection`).
const SMALL_REPLY: usize = 16 * 1024;

/// The state a connection is in once its output is written: parsing what
/// is left, waiting for a data block (memcached's conn_nread), or reading.
fn after(session: &Session, input: &BytesMut) -> State {
    if session.pending() {
        State::ParseCmd
    } else if session.awaiting_data(input) {
        State::Nread
    } else {
        State::Read
    }
}

/// A `watch` connection: writes its log lines as they come until the peer
/// goes away. What the peer sends is ignored (memcached stops reading a
/// watcher); it is only read to notice the close.
async fn stream_watch<S>(stream: &mut S, w: &Watcher, shutdown: &mut Shutdown) -> std::io::Result<Ended>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut sink = [0u8; 4096];
    loop {
        let lines = w.take();
        if !lines.is_empty() {
            stream.write_all(&lines).await?;
            continue;
        }
        tokio::select! {
            _ = w.ready.notified() => {}
            r = stream.read(&mut sink) => if r? == 0 { return Ok(Ended::Normal) },
            _ = shutdown.recv() => return Ok(Ended::Shutdown),
        }
    }
}
