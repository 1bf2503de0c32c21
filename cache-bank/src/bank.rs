//! The bank: many nodes, one placement, one pipelined batch per node.
//!
//! Reads (`get_many`, `claim_many`) send one batch to every node that holds
//! a requested key, all nodes in parallel, so N keys cost one round trip;
//! a node that errs or is slower than `timeout` yields misses and is backed
//! off. Writes (`update`) are the storage servers' and follow stricter rules
//! (see [`Bank::update`]).

use crate::codec::Codec;
use crate::conn::Conn;
use crate::credentials::Credentials;
use crate::reply::{Expect, Reply};
use crate::error::BankError;
use crate::metrics::BankMetrics;
use crate::node::Node;
use crate::placement::{CacheKey, Ring};
use bytes::Bytes;
use cache_proto::client;
use cache_proto::response::{Response, Status};
use cache_proto::text::{Command, StoreOp};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volume::Placement;

#[derive(Clone, Debug)]
pub struct BankOptions {
    /// a read slower than this is a miss (and backs the node off)
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Reach the nodes over RDMA (their listener on the same ip:port; see
    /// `node.rs` for the fallback). The daemon sets it from its
    /// `--transport` in the options it hands to CMCache / SMCache, which
    /// build their banks from the volume's cache config (nodes, not
    /// transports) with these options.
    pub rdma: bool,
    /// where the bank counts (registered once by the daemon; see [`BankMetrics`])
    pub metrics: BankMetrics,
    /// The volume's `secret::Purpose::BankValues` key: every value is
    /// MAC-framed and checked (see `codec.rs`). `None` = the volume runs
    /// `--insecure`: CRC framing, which anyone on the cache network can forge.
    pub value_key: Option<secret::Key>,
    /// Encrypt the values this daemon writes (`--cache-encrypt`; needs
    /// `value_key`). Readers open encrypted and plain values alike.
    pub encrypt_values: bool,
    /// Log in to every node connection with these (`--cache-auth-file`;
    /// nodes run `-Y`). A node that refuses them is treated as down.
    pub node_credentials: Option<Credentials>,
    /// Use nodes that serve requests without a login
    /// (`--cache-allow-open-nodes`; implied without credentials).
    pub allow_open_nodes: bool,
}

impl Default for BankOptions {
    fn default() -> Self {
        BankOptions {
            timeout: Duration::from_millis(volume::DEFAULT_BANK_TIMEOUT_MS),
            connect_timeout: Duration::from_millis(200),
            rdma: false,
            metrics: BankMetrics::default(),
            value_key: None,
            encrypt_values: false,
            node_credentials: None,
            allow_open_nodes: true,
        }
    }
}

/// A value found in the bank, with its CAS unique when asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    pub value: Bytes,
    pub cas: Option<u64>,
}

/// One change to the bank.
#[derive(Clone, Debug)]
pub enum Update {
    Set(CacheKey, Bytes),
    /// store only if absent (a read's populate)
    Add(CacheKey, Bytes),
    /// store only if the CAS unique still matches (a claimed populate)
    Cas(CacheKey, Bytes, u64),
    Delete(CacheKey),
}

impl Update {
    fn key(&self) -> &CacheKey {
        match self {
            Update::Set(k, _) | Update::Add(k, _) | Update::Cas(k, _, _) | Update::Delete(k) => k,
        }
    }

    fn op(&self) -> &'static str {
        match self {
            Update::Set(..) => "set",
            Update::Add(..) => "add",
            Update::Cas(..) => "cas",
            Update::Delete(..) => "delete",
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Update::Set(k, v) => store(out, StoreOp::Set, k, v, 0, 0),
            Update::Add(k, v) => store(out, StoreOp::Add, k, v, 0, 0),
            Update::Cas(k, v, c) => store(out, StoreOp::Cas, k, v, 0, *c),
            Update::Delete(k) => client::request(out, &Command::Delete { key: k.key.as_bytes(), noreply: false }, &[]),
        }
    }

    /// Did the node do what we need? A refused add or cas is fine (someone
    /// stored first / the claim was broken by an invalidation); a set or
    /// delete must have happened.
    fn accepted(&self, reply: &Reply) -> bool {
        use Status::*;
        let Reply::Line(Response::Status(s)) = reply else { return false };
        match self {
            Update::Set(..) => *s == Stored,
            Update::Add(..) | Update::Cas(..) => matches!(s, Stored | NotStored | Exists | NotFound),
            Update::Delete(..) => matches!(s, Deleted | NotFound),
        }
    }
}

/// A storage command as the bank sends them: no flags, always answered.
fn store(out: &mut Vec<u8>, op: StoreOp, key: &CacheKey, v: &[u8], exptime: i32, cas: u64) {
    let cmd = Command::Store { op, key: key.key.as_bytes(), flags: 0, exptime, len: v.len(), cas, noreply: false };
    client::request(out, &cmd, v);
}

/// `get`/`gets` lines for `keys`, each answered by its own values and END.
fn get_lines(out: &mut Vec<u8>, expect: &mut Vec<Expect>, cas: bool, keys: &[&[u8]]) {
    expect.extend(client::multi_get(out, cas, keys).into_iter().map(|n| Expect::Values(n as u32)));
}

pub struct Bank {
    nodes: Vec<Arc<Node>>,
    ring: Ring,
    codec: Codec,
    opts: BankOptions,
}

/// Keys one `timeout` covers: a batch of more (a listing's 256 entries) gets
/// one more `timeout` per this many. A busy node answers a big batch later
/// than a small one, and its miss costs more: the servers then read what
/// the batch held, on a cold disk an inode per key.
const KEYS_PER_TIMEOUT: usize = 64;

/// How long a batch expecting `replies` replies (keys, or lines) may take.
fn batch_timeout(timeout: Duration, replies: usize) -> Duration {
    timeout * (1 + replies / KEYS_PER_TIMEOUT).min(16) as u32
}

impl Bank {
    pub fn new(addrs: &[String], placement: Placement, opts: BankOptions) -> Bank {
        let node = |a: &String| {
            Arc::new(Node::new(
                a.clone(),
                opts.rdma,
                opts.metrics.clone(),
                opts.node_credentials.clone(),
                opts.allow_open_nodes,
            ))
        };
        Bank {
            nodes: addrs.iter().map(node).collect(),
            ring: Ring::new(placement, addrs),
            codec: Codec::new(opts.value_key.clone(), opts.encrypt_values, opts.metrics.clone()),
            opts,
        }
    }

    /// How this bank's values are framed and checked: every value stored
    /// through it is made by `codec().encode`, every value read is checked
    /// by `codec().decode` (a refusal is a miss).
    pub fn codec(&self) -> &Codec {
        &self.codec
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    pub fn options(&self) -> &BankOptions {
        &self.opts
    }

    pub fn node_for(&self, key: &CacheKey) -> Option<usize> {
        self.ring.node_for(key)
    }

    /// Which node holds each key (indices into `keys` per node).
    fn group<'a, I: Iterator<Item = &'a CacheKey>>(&self, keys: I) -> Vec<Vec<usize>> {
        let mut per = vec![Vec::new(); self.nodes.len()];
        for (i, k) in keys.enumerate() {
            if let Some(n) = self.ring.node_for(k) {
                per[n].push(i);
            }
        }
        per
    }

    /// Send one batch to node `n` on the read path: any failure is a miss
    /// and backs the node off.
    async fn read_batch(&self, n: usize, bytes: Vec<u8>, expect: Vec<Expect>, op: &str) -> Option<Vec<Reply>> {
        let node = &self.nodes[n];
        let conn = match node.conn(self.opts.connect_timeout, false).await {
            Ok(c) => c,
            Err(_) => return None,
        };
        let start = Instant::now();
        let limit = batch_timeout(self.opts.timeout, expect.iter().map(Expect::replies).sum());
        let rx = conn.send(bytes, expect);
        let res = tokio::time::timeout(limit, rx).await;
        self.opts.metrics.latency.with_label_values(&[op]).observe(start.elapsed().as_secs_f64());
        match res {
            Ok(Ok(Ok(replies))) => {
                node.succeeded().await;
                Some(replies)
            }
            Ok(Ok(Err(e))) => {
                tracing::debug!(node = %node.addr, error = %e, "bank read failed");
                if let BankError::Server(_, said) = &e {
                    node.note_refusal(said);
                }
                node.fail(&conn).await;
                None
            }
            Ok(Err(_)) | Err(_) => {
                tracing::debug!(node = %node.addr, "bank read timed out");
                node.fail(&conn).await;
                None
            }
        }
    }

    /// Look up `keys`: one pipelined batch per node, all nodes at once.
    /// `cas` asks for CAS uniques (`gets`). Errors and timeouts are misses.
    pub async fn get_many(&self, keys: &[CacheKey], cas: bool) -> Vec<Option<Hit>> {
        let per = self.group(keys.iter());
        let futs = per.iter().enumerate().filter(|(_, idx)| !idx.is_empty()).map(|(n, idx)| {
            let mut bytes = Vec::with_capacity(64 + idx.len() * 64);
            let mut expect = Vec::new();
            let ks: Vec<&[u8]> = idx.iter().map(|&i| keys[i].key.as_bytes()).collect();
            get_lines(&mut bytes, &mut expect, cas, &ks);
            async move { (n, self.read_batch(n, bytes, expect, "get").await) }
        });
        let results = futures::future::join_all(futs).await;
        let mut out = vec![None; keys.len()];
        let mut want: HashMap<&[u8], Vec<usize>> = HashMap::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            want.entry(k.key.as_bytes()).or_default().push(i);
        }
        for (n, res) in results {
            let addr = &self.nodes[n].addr;
            let asked = per[n].len() as u64;
            let Some(replies) = res else {
                self.opts.metrics.count(addr, "get", "error", asked);
                continue;
            };
            let (mut hits, mut bytes) = (0u64, 0u64);
            for r in replies {
                if let Reply::Values(vals) = r {
                    for v in vals {
                        if let Some(is) = want.get(&v.key[..]) {
                            hits += 1;
                            bytes += v.data.len() as u64;
                            for &i in is {
                                out[i] = Some(Hit { value: v.data.clone(), cas: v.cas });
                            }
                        }
                    }
                }
            }
            self.opts.metrics.count(addr, "get", "hit", hits);
            self.opts.metrics.count(addr, "get", "miss", asked.saturating_sub(hits));
            if bytes > 0 {
                self.opts.metrics.bytes.with_label_values(&[addr]).inc_by(bytes);
            }
        }
        out
    }

    /// Claim keys for populating: for each key, `add` the `placeholder`
    /// (succeeds only if the key is absent) and then `gets` it, in one round
    /// trip. The answer is the key's current value and CAS unique: a real
    /// value (someone else populated it), or the placeholder, whose CAS
    /// unique a later [`Update::Cas`] must present. An invalidating delete
    /// between the claim and the cas makes the cas fail, which is how a
    /// populate computed from data read before a mutation can never land
    /// after it.
    pub async fn claim_many(&self, keys: &[CacheKey], placeholder: &Bytes) -> Vec<Option<Hit>> {
        let per = self.group(keys.iter());
        let futs = per.iter().enumerate().filter(|(_, idx)| !idx.is_empty()).map(|(n, idx)| {
            let mut bytes = Vec::new();
            let mut expect = Vec::new();
            for &i in idx {
                // placeholders expire on their own if the claimant dies
                store(&mut bytes, StoreOp::Add, &keys[i], placeholder, 30, 0);
                expect.push(Expect::Line);
            }
            let ks: Vec<&[u8]> = idx.iter().map(|&i| keys[i].key.as_bytes()).collect();
            get_lines(&mut bytes, &mut expect, true, &ks);
            async move { (n, self.read_batch(n, bytes, expect, "claim").await) }
        });
        let results = futures::future::join_all(futs).await;
        let mut out = vec![None; keys.len()];
        let index: HashMap<&[u8], usize> = keys.iter().enumerate().map(|(i, k)| (k.key.as_bytes(), i)).collect();
        for (n, res) in results {
            let addr = &self.nodes[n].addr;
            let Some(replies) = res else {
                self.opts.metrics.count(addr, "claim", "error", per[n].len() as u64);
                continue;
            };
            for r in replies {
                if let Reply::Values(vals) = r {
                    for v in vals {
                        if let Some(&i) = index.get(&v.key[..]) {
                            out[i] = Some(Hit { value: v.data, cas: v.cas });
                        }
                    }
                }
            }
            self.opts.metrics.count(addr, "claim", "ok", per[n].len() as u64);
        }
        out
    }

    /// Apply updates.
    ///
    /// `wait = None`: queue them and return (a populate: losing it costs a
    /// miss, nothing more). They still take their place in each node's order
    /// before this returns.
    ///
    /// `wait = Some(deadline)`: return only when every node has applied its
    /// share, or is proven empty (its address refuses connections: the
    /// process that held old values is gone). A slow or frozen node is
    /// waited for — on the same connection, so nothing sent earlier can be
    /// applied after — until the deadline, then `Err(Timeout)`. A broken
    /// connection is replaced and the batch sent again (sets and deletes are
    /// idempotent). This is what lets a storage server acknowledge a
    /// mutation only once no cache node can serve what it replaced.
    pub async fn update(&self, ops: &[Update], wait: Option<Duration>) -> Result<(), BankError> {
        self.update_each(ops, wait).await.into_iter().next().map_or(Ok(()), Err)
    }

    /// [`update`](Self::update), reporting every node that did not confirm
    /// (empty = all confirmed), so a caller can have exactly those fenced.
    pub async fn update_each(&self, ops: &[Update], wait: Option<Duration>) -> Vec<BankError> {
        let per = self.group(ops.iter().map(|u| u.key()));
        let deadline = wait.map(|d| (Instant::now() + d, d));
        let futs = per
            .iter()
            .enumerate()
            .filter(|(_, idx)| !idx.is_empty())
            .map(|(n, idx)| self.node_update(n, idx.iter().map(|&i| &ops[i]).collect(), deadline));
        let results = futures::future::join_all(futs).await;
        results.into_iter().filter_map(Result::err).collect()
    }

    /// `deadline`: (when, the wait it was computed from — for the error).
    async fn node_update(
        &self,
        n: usize,
        ops: Vec<&Update>,
        deadline: Option<(Instant, Duration)>,
    ) -> Result<(), BankError> {
        let node = &self.nodes[n];
        let mut bytes = Vec::new();
        for u in &ops {
            u.encode(&mut bytes);
        }
        let expect = vec![Expect::Line; ops.len()];
        let Some((deadline, waited)) = deadline else {
            if let Ok(conn) = node.conn(self.opts.connect_timeout, false).await {
                if conn.pending() < 10_000 {
                    drop(conn.send(bytes, expect));
                    for u in &ops {
                        self.opts.metrics.count(&node.addr, u.op(), "queued", 1);
                    }
                }
            }
            return Ok(());
        };
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(BankError::Timeout(node.addr.clone(), waited));
            }
            let conn: Arc<Conn> =
                match tokio::time::timeout(deadline - now, node.conn(self.opts.connect_timeout, true)).await {
                    Ok(Ok(c)) => c,
                    Ok(Err(BankError::Refused(_))) => {
                        for u in &ops {
                            self.opts.metrics.count(&node.addr, u.op(), "node_gone", 1);
                        }
                        return Ok(());
                    }
                    Ok(Err(_)) => {
                        tokio::time::sleep(Duration::from_millis(5).min(deadline - Instant::now().min(deadline)))
                            .await;
                        continue;
                    }
                    Err(_) => return Err(BankError::Timeout(node.addr.clone(), waited)),
                };
            let start = Instant::now();
            let rx = conn.send(bytes.clone(), expect.clone());
            match tokio::time::timeout_at(deadline.into(), rx).await {
                Ok(Ok(Ok(replies))) => {
                    self.opts.metrics.latency.with_label_values(&["update"]).observe(start.elapsed().as_secs_f64());
                    if let Some(said) = replies.iter().find_map(Node::unauthenticated) {
                        // a node that wants a login we did not give: down for us, like a failing one
                        node.note_refusal(&said);
                        node.fail(&conn).await;
                        for u in &ops {
                            self.opts.metrics.count(&node.addr, u.op(), "error", 1);
                        }
                        return Err(BankError::Server(node.addr.clone(), said));
                    }
                    node.succeeded().await;
                    let mut redo = Vec::new();
                    for (u, r) in ops.iter().zip(replies) {
                        if u.accepted(&r) {
                            self.opts.metrics.count(&node.addr, u.op(), "ok", 1);
                        } else {
                            self.opts.metrics.count(&node.addr, u.op(), "error", 1);
                            tracing::warn!(node = %node.addr, op = u.op(), reply = %r, "bank refused an update");
                            redo.push(Update::Delete(u.key().clone()));
                        }
                    }
                    if redo.is_empty() {
                        return Ok(());
                    }
                    if ops.iter().all(|u| matches!(u, Update::Delete(_))) {
                        // deletes refused: deleting again would only be refused again
                        return Err(BankError::Server(node.addr.clone(), "refused deletes".into()));
                    }
                    // A set the node refused may leave an older value behind: delete it.
                    let redo_refs: Vec<&Update> = redo.iter().collect();
                    return Box::pin(self.node_update(n, redo_refs, Some((deadline, waited)))).await;
                }
                Ok(Ok(Err(e))) => {
                    tracing::debug!(node = %node.addr, error = %e, "bank update failed; reconnecting");
                    node.drop_conn(&conn).await;
                }
                Ok(Err(_)) => node.drop_conn(&conn).await,
                Err(_) => {
                    for u in &ops {
                        self.opts.metrics.count(&node.addr, u.op(), "timeout", 1);
                    }
                    return Err(BankError::Timeout(node.addr.clone(), waited));
                }
            }
        }
    }

    /// `flush_all` on every node (admin use and tests).
    pub async fn flush_all(&self) -> Vec<Result<(), BankError>> {
        let futs = self.nodes.iter().enumerate().map(|(n, node)| async move {
            let mut flush = Vec::new();
            client::request(&mut flush, &Command::FlushAll { delay: 0, noreply: false }, &[]);
            match self.read_batch(n, flush, vec![Expect::Line], "flush").await {
                Some(r) if r == [Reply::Line(Response::Status(Status::Ok))] => Ok(()),
                Some(r) => Err(BankError::Server(node.addr.clone(), format!("{r:?}"))),
                None => Err(BankError::Down(node.addr.clone())),
            }
        });
        futures::future::join_all(futs).await
    }

    /// Per node: address and whether it is currently backed off.
    pub async fn status(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for n in &self.nodes {
            out.push((n.addr.clone(), !n.is_down().await));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_batch_gets_more_time_within_a_bound() {
        let t = Duration::from_millis(5);
        assert_eq!(batch_timeout(t, 1), t, "a lookup's few keys: the volume's timeout");
        assert_eq!(batch_timeout(t, 63), t);
        assert_eq!(batch_timeout(t, 64), 2 * t);
        assert_eq!(batch_timeout(t, 256), 5 * t, "a listing's batch");
        assert_eq!(batch_timeout(t, 1_000_000), 16 * t, "never more than 16 timeouts");
    }
}
