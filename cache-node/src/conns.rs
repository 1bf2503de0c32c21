//! The open connections, for `stats conns` (memcached's per-connection
//! lines: `<fd>:addr`, `<fd>:listen_addr`, `<fd>:state`,
//! `<fd>:secs_since_last_cmd`, keyed by the socket's real fd as memcached
//! keys them). A worker registers a connection when it takes it and drops
//! the entry when it ends; the session updates the state and the time of
//! its last command with relaxed atomic stores (no lock on the request path).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// memcached's connection states, as far as a connection here has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// waiting for a request (memcached's idle state)
    Read = 0,
    /// a request line arrived, its data block has not yet
    Nread = 1,
    /// running requests (the connection asking `stats conns` sees itself so)
    ParseCmd = 2,
    /// writing replies the peer has not taken yet
    Mwrite = 3,
    /// a `watch` connection streaming log lines
    Watch = 4,
}

impl State {
    fn text(v: u8) -> &'static str {
        ["conn_read", "conn_nread", "conn_parse_cmd", "conn_mwrite", "conn_watch"].get(v as usize).copied().unwrap_or("conn_read")
    }
}

/// One connection's line in `stats conns`.
pub struct Conn {
    /// the socket's fd (memcached's `cfd=` in log lines, the key here)
    pub fd: i32,
    /// `tcp:ip:port` of the peer; memcached prints `?:<AF 0>` for a UNIX
    /// socket peer (it has no address), and so does this
    pub addr: String,
    /// the listener's name (`tcp:ip:port`, `unix:path`)
    pub listen_addr: String,
    state: AtomicU8,
    /// node clock seconds (`Clock::now`) of the last command
    last_cmd: AtomicU32,
}

impl Conn {
    pub fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    pub fn touch(&self, now: u32) {
        self.last_cmd.store(now, Ordering::Relaxed);
    }
}

/// The listener and every open connection, by fd.
#[derive(Default)]
pub struct Table {
    listener: Mutex<Option<(i32, String, u32)>>,
    open: Mutex<BTreeMap<i32, Arc<Conn>>>,
}

impl Table {
    /// The listening socket's line (`conn_listening`, seconds since start).
    pub fn set_listener(&self, fd: i32, name: String, now: u32) {
        *self.listener.lock().unwrap_or_else(|e| e.into_inner()) = Some((fd, name, now));
    }

    pub fn open(&self, fd: i32, addr: String, listen_addr: String, now: u32) -> Arc<Conn> {
        let c = Arc::new(Conn { fd, addr, listen_addr, state: AtomicU8::new(State::Read as u8), last_cmd: AtomicU32::new(now) });
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(fd, c.clone());
        c
    }

    pub fn close(&self, fd: i32) {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&fd);
    }

    /// memcached's `stats conns` list, in fd order.
    pub fn stats(&self, now: u32) -> Vec<(String, String)> {
        let mut l = Vec::new();
        let since = |t: u32| now.saturating_sub(t).to_string();
        let listener = self.listener.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let open: Vec<(i32, Arc<Conn>)> =
            self.open.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (*k, v.clone())).collect();
        let mut rows: Vec<(i32, Option<Arc<Conn>>)> = open.into_iter().map(|(fd, c)| (fd, Some(c))).collect();
        if let Some((fd, _, _)) = &listener {
            rows.push((*fd, None));
        }
        rows.sort_by_key(|r| r.0);
        for (fd, c) in rows {
            match c {
                None => {
                    let (_, name, started) = listener.as_ref().expect("the listener row");
                    l.push((format!("{fd}:addr"), name.clone()));
                    l.push((format!("{fd}:state"), "conn_listening".into()));
                    l.push((format!("{fd}:secs_since_last_cmd"), since(*started)));
                }
                Some(c) => {
                    l.push((format!("{fd}:addr"), c.addr.clone()));
                    l.push((format!("{fd}:listen_addr"), c.listen_addr.clone()));
                    l.push((format!("{fd}:state"), State::text(c.state.load(Ordering::Relaxed)).into()));
                    l.push((format!("{fd}:secs_since_last_cmd"), since(c.last_cmd.load(Ordering::Relaxed))));
                }
            }
        }
        l
    }
}
