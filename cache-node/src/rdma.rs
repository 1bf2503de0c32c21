//! The cache node over RDMA (`--rdma ADDR`): memcached's protocol carried in
//! transport messages (added by the rdma helper).
//!
//! A request's head and bulk, concatenated, are memcached protocol bytes (a
//! client puts a large value in the bulk, which the RDMA transport pulls with
//! an RDMA Read); the reply's bulk is the bytes memcached would have written
//! (RDMA-Written into the client's buffer when large: a multi-get's values
//! land directly in the client's memory). Same [`Session`], same semantics
//! as over TCP.

use crate::{Node, Session};
use bytes::{Bytes, BytesMut};
use std::sync::Arc;
use transport::{Message, RpcService};

pub struct MemcacheService {
    node: Arc<Node>,
}

impl MemcacheService {
    pub fn new(node: Arc<Node>) -> MemcacheService {
        MemcacheService { node }
    }
}

#[async_trait::async_trait]
impl RpcService for MemcacheService {
    async fn handle(&self, req: Message) -> Message {
        let mut input = BytesMut::with_capacity(req.head.len() + req.bulk.len());
        input.extend_from_slice(&req.head);
        input.extend_from_slice(&req.bulk);
        let mut session = Session::new(self.node.clone());
        let mut out = Vec::new();
        loop {
            let p = session.process(&mut input, &mut out);
            if !session.pending() || matches!(p, crate::Progress::Close) {
                break;
            }
        }
        if !input.is_empty() {
            // One message carries whole requests; a partial one cannot complete later.
            out.extend_from_slice(b"CLIENT_ERROR incomplete request\r\n");
        }
        Message::new(Bytes::new(), Bytes::from(out))
    }
}
