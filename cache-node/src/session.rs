//! A connection's request processing, independent of any socket.
//!
//! Bytes in, bytes out: the owner of a connection (the TCP listener here, an
//! RDMA listener elsewhere) appends what it read to `input`, calls
//! [`Session::process`], writes `out` back to the peer, and closes the
//! connection when told to. The protocol is chosen by the first byte, as in
//! memcached. Requests are answered strictly in order, so pipelining works.
//! With `-Y`, the login (`auth.rs`) comes first and the protocol is text;
//! with `-S` too, a connection that opens in binary logs in with SASL
//! (`exec_sasl.rs`) instead.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use cache_proto::{binary, text, Parse, BINARY_REQ_MAGIC};

use crate::auth::{self, Login, Step};
use crate::config::Binding;
use crate::conns::Conn;
use crate::node::Node;
use crate::out::Out;
use crate::stats::{Counters, C};
use crate::watch::Watcher;

/// What the owner of the connection should do after [`Session::process`].
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Progress {
    /// Write `out`, then read more.
    Continue,
    /// Write `out`, then close the connection.
    Close,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proto {
    Text,
    Binary,
}

/// `process` stops taking requests once this much output is waiting, so a
/// peer that pipelines many large gets cannot make one batch's replies
/// grow without bound; the owner writes `out` and calls `process` again.
pub const OUT_HIGH_WATER: usize = 1 << 20;

pub struct Session {
    pub(crate) node: Arc<Node>,
    /// the last `process` stopped at the output high-water mark
    pending: bool,
    proto: Option<Proto>,
    /// bytes of a refused data block still to discard
    swallow: usize,
    pub(crate) cnt: Counters,
    latency: Option<prometheus::local::LocalHistogram>,
    /// where the login stands (`Done` from the start without `-Y`)
    pub(crate) login: Login,
    /// a binary connection under `-S` that has not logged in with SASL yet
    pub(crate) sasl_pending: bool,
    /// this connection's `stats conns` entry (none for RDMA and tests)
    pub conn: Option<Arc<Conn>>,
    /// set by `watch`: the connection now streams this watcher's lines
    pub(crate) watcher: Option<Arc<Watcher>>,
    /// replies of this batch wait behind the current command (memcached's
    /// `resp_has_stack`; its get and mn flush them), for `watch`'s refusal
    pub(crate) stacked: bool,
    /// requests at the front of the input whose keys are warmed already
    /// (`store::prefetch::warm_run`)
    warmed: usize,
}

/// What executing one frame asks of the session.
pub(crate) enum After {
    Continue,
    Swallow(usize),
    Close,
    /// `watch` succeeded: take no more commands
    Watch,
}

impl Session {
    pub fn new(node: Arc<Node>) -> Session {
        let latency = node.metrics.as_ref().map(|m| m.latency.local());
        let login = if node.config.auth.is_some() { Login::Line } else { Login::Done };
        // -B: a bound listener never negotiates
        let proto = match node.config.binding {
            Binding::Auto => None,
            Binding::Ascii => Some(Proto::Text),
            Binding::Binary => Some(Proto::Binary),
        };
        Session {
            node,
            pending: false,
            proto,
            swallow: 0,
            cnt: Counters::default(),
            latency,
            login,
            sasl_pending: false,
            conn: None,
            watcher: None,
            stacked: false,
            warmed: 0,
        }
    }

    /// After `watch` succeeded: the watcher whose lines the owner of the
    /// connection must now write out (it takes no more commands; what is
    /// left in `input` is never run, as in memcached).
    pub fn take_watcher(&mut self) -> Option<Arc<Watcher>> {
        self.watcher.take()
    }

    /// False until the connection has logged in (always true without `-Y`).
    pub fn logged_in(&self) -> bool {
        self.login == Login::Done
    }

    /// True when `input` (what the last `process` left) holds a request
    /// whose line or header arrived but whose data has not: memcached's
    /// `conn_nread`, for `stats conns`.
    pub fn awaiting_data(&self, input: &[u8]) -> bool {
        self.swallow > 0
            || match self.proto {
                Some(Proto::Binary) => input.len() >= cache_proto::binary::HEADER_LEN,
                _ => input.contains(&b'\n'),
            }
    }

    /// True when the last [`process`](Self::process) stopped because `out`
    /// reached [`OUT_HIGH_WATER`] with complete requests possibly left in
    /// `input`: write `out`, then call `process` again before reading more.
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Consumes complete requests at the front of `input` (leaving a partial
    /// one in place, and stopping early at [`OUT_HIGH_WATER`] bytes of
    /// output) and appends the replies to `out`.
    pub fn process(&mut self, input: &mut BytesMut, out: &mut Vec<u8>) -> Progress {
        let mut o = Out::from_vec(std::mem::take(out));
        let progress = self.process_out(input, &mut o);
        *out = o.into_vec();
        progress
    }

    /// [`process`](Self::process) into an [`Out`]: large values are pinned,
    /// not copied (for owners that write with `writev`, [`Out::write_to`]).
    pub fn process_out(&mut self, input: &mut BytesMut, out: &mut Out) -> Progress {
        let before = out.len();
        let in_len = input.len();
        let progress = self.run(input, out);
        // bytes_read counts what we consumed; a partial request counts next time.
        self.cnt.add(C::BytesRead, (in_len - input.len()) as u64);
        if let Some(c) = self.conn.as_ref().filter(|_| in_len != input.len()) {
            c.touch(self.node.store.clock.now());
        }
        self.cnt.add(C::BytesWritten, (out.len() - before) as u64);
        self.node.stats.flush(&mut self.cnt);
        if let Some(l) = &self.latency {
            l.flush();
        }
        progress
    }

    fn run(&mut self, input: &mut BytesMut, out: &mut Out) -> Progress {
        let max_value = self.node.config.max_value();
        self.pending = false;
        // what the last batch answered has been written
        self.stacked = false;
        loop {
            if out.len() >= OUT_HIGH_WATER {
                self.pending = !input.is_empty();
                return Progress::Continue;
            }
            if self.swallow > 0 {
                let n = self.swallow.min(input.len());
                input.advance(n);
                self.swallow -= n;
                if self.swallow > 0 {
                    return Progress::Continue;
                }
            }
            if input.is_empty() {
                return Progress::Continue;
            }
            if self.login == Login::Line && !self.sasl_pending && self.node.config.sasl && self.proto != Some(Proto::Text) {
                // -S: a binary first byte logs in with SASL (every binary
                // request is then refused until it has)
                if input[0] == BINARY_REQ_MAGIC || self.proto == Some(Proto::Binary) {
                    self.proto = Some(Proto::Binary);
                    self.sasl_pending = true;
                }
            }
            if self.login != Login::Done && !self.sasl_pending {
                let Some(users) = self.node.config.auth.clone() else { unreachable!("login without -Y") };
                match self.login.step(input, &users) {
                    Step::Incomplete => return Progress::Continue,
                    Step::Close => return Progress::Close,
                    Step::Consumed { used, reply } => {
                        // as memcached: a login that named a user and password counts
                        // (`auth_cmds`), a wrong one also as an error
                        if reply == Some(auth::STORED) || reply == Some(auth::FAILURE) {
                            self.cnt.inc(C::AuthCmds);
                        }
                        if reply == Some(auth::FAILURE) {
                            self.cnt.inc(C::AuthErrors);
                        }
                        input.advance(used);
                        out.buf().extend_from_slice(reply.unwrap_or_default());
                        if self.login == Login::Done {
                            // memcached never switches to binary after an ASCII login
                            self.proto = Some(Proto::Text);
                        }
                        continue;
                    }
                }
            }
            let proto = *self.proto.get_or_insert(if input[0] == BINARY_REQ_MAGIC { Proto::Binary } else { Proto::Text });
            // a run of pipelined mg / binary gets: warm a batch of its
            // lookups together, as a multi-get's (`store/prefetch.rs`)
            if self.warmed == 0 && (input[0] == BINARY_REQ_MAGIC || input[0] == b'm') {
                self.warmed = crate::store::prefetch::warm_run(&self.node.store, input, proto == Proto::Binary);
            }
            let t0 = self.latency.as_ref().map(|_| Instant::now());
            // `get <key>`: the same exec_get, without the parser's allocations
            let single = if proto == Proto::Text { crate::single_get::single_get(input) } else { None };
            let (after, used) = match (proto, single) {
                (Proto::Text, Some((key, used))) => {
                    self.exec_get(&[key], false, None, out);
                    // a get writes out what was queued (exec_text's `flushes`)
                    self.stacked = false;
                    (After::Continue, used)
                }
                (Proto::Text, None) => match text::parse(input, max_value) {
                    Parse::Incomplete => return Progress::Continue,
                    Parse::Close => return Progress::Close,
                    Parse::Done(frame, used) => (self.exec_text(frame, out), used),
                },
                (Proto::Binary, _) => match binary::parse(input, max_value) {
                    Parse::Incomplete => return Progress::Continue,
                    Parse::Close => return Progress::Close,
                    Parse::Done(frame, used) => (self.exec_binary(frame, out.buf()), used),
                },
            };
            input.advance(used);
            self.warmed = self.warmed.saturating_sub(1);
            if let (Some(l), Some(t0)) = (&self.latency, t0) {
                l.observe(t0.elapsed().as_secs_f64());
            }
            match after {
                After::Continue => {}
                After::Swallow(n) => self.swallow = n,
                After::Close => return Progress::Close,
                After::Watch => return Progress::Continue,
            }
        }
    }
}
