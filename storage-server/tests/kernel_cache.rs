//! The kernel-cache poll over a real server: a gateway's session renews its
//! own lease; a poll naming another session is refused, so no peer can
//! renew a gateway's lease or acknowledge its invalidations for it.

mod common;

use transport::RpcClient;
use wire::{decode_reply, Reply, Request};
use xlator::FsError;

#[tokio::test]
async fn a_poll_counts_only_in_its_own_session() {
    let e = common::env().await;
    let rpc = transport::tcp::TcpClient::connect(
        e.server.addr.to_string(),
        transport::tcp::TcpClientOptions { auth: Some(common::key()), ..Default::default() },
    )
    .await
    .unwrap();
    let poll = |session: u64, envelope: u64| {
        let rpc = &rpc;
        async move {
            let r = rpc.call(Request::Poll { session, acked: 0 }.encode_in_session(envelope), 0).await.unwrap();
            decode_reply(&r).unwrap().result
        }
    };
    // Its own session: a lease, and "fresh" (the server did not know it).
    match poll(7, 7).await.unwrap() {
        Reply::Callbacks { lease_ms, fresh, .. } => assert!(lease_ms > 0 && fresh),
        other => panic!("{other:?}"),
    }
    // Another gateway's session, or none: refused.
    assert_eq!(poll(7, 8).await.unwrap_err(), FsError::EINVAL);
    assert_eq!(poll(7, wire::NO_SESSION).await.unwrap_err(), FsError::EINVAL);
}
