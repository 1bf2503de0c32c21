//! protocol-client against a real TCP server that answers wrongly: replies
//! of the wrong kind, undecodable heads, oversized reads, stale epochs. Each
//! must become EIO for that call (never a panic, never a hang), and the
//! epoch the client reports must only ever move forward.

use async_trait::async_trait;
use bytes::Bytes;
use protocol_client::{ClientOptions, ProtocolClient};
use std::sync::Arc;
use std::time::Duration;
use transport::{Message, RpcService};
use wire::{encode_reply, Reply, Request};
use volume::CacheConfig;
use xlator::*;

struct Liar;

#[async_trait]
impl RpcService for Liar {
    async fn handle(&self, req: Message) -> Message {
        match Request::decode(&req).unwrap() {
            Request::GetVolumeConfig {} => {
                encode_reply(7, &Ok(Reply::Config { accepted: false, config: CacheConfig { epoch: 7, ..Default::default() }, fence: Vec::new() }))
            }
            Request::Getattr { .. } => encode_reply(5, &Ok(Reply::Unit)),
            Request::Statfs { .. } => Message::new(Bytes::from_static(&[1, 2, 3]), Bytes::new()),
            Request::Read { size, .. } => encode_reply(3, &Ok(Reply::Data(Bytes::from(vec![0u8; size as usize + 1])))),
            Request::Readlink { .. } => encode_reply(9, &Err(FsError::EINVAL)),
            Request::Flush { .. } => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                encode_reply(1, &Ok(Reply::Unit))
            }
            _ => encode_reply(1, &Err(FsError::ENOSYS)),
        }
    }
}

#[tokio::test]
async fn wrong_answers_become_eio_and_the_epoch_only_moves_forward() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(transport::tcp::serve(l, Arc::new(Liar), Default::default(), std::future::pending()));
    let opts = ClientOptions { op_timeout: Duration::from_millis(700), ..Default::default() };
    let c: ProtocolClient = protocol_client::connect(&addr, opts).await.unwrap();
    assert_eq!(c.epoch(), 7, "connect learns the epoch");
    let mut w = c.epoch_watch();
    w.borrow_and_update();

    assert_eq!(c.getattr(&Loc::root()).await.unwrap_err(), FsError::EIO, "wrong reply kind");
    assert_eq!(c.statfs(&Loc::root()).await.unwrap_err(), FsError::EIO, "undecodable reply");
    assert_eq!(c.read(&Loc::root(), 0, 10).await.unwrap_err(), FsError::EIO, "more data than asked");
    assert_eq!(c.epoch(), 7, "older epochs never win");
    assert!(!w.has_changed().unwrap());
    assert_eq!(c.readlink(&Loc::root()).await.unwrap_err(), FsError::EINVAL, "errno passes through");
    assert_eq!(c.epoch(), 9);
    assert!(w.has_changed().unwrap());
    let t = std::time::Instant::now();
    assert_eq!(c.flush(&Loc::root()).await.unwrap_err(), FsError::EIO, "timeout");
    assert!(t.elapsed() < Duration::from_secs(10));
    // The server missed its deadline: it is marked down, its calls fail at
    // once, until a probe gets an answer; then it is used again.
    let t = std::time::Instant::now();
    assert_eq!(c.fetch_volume_config().await.unwrap_err(), FsError::EIO, "marked down");
    assert!(t.elapsed() < Duration::from_millis(100), "failed at once ({:?})", t.elapsed());
    assert!(c.down_for().is_some());
    let back = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(cfg) = c.fetch_volume_config().await {
                return cfg;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert_eq!(back.await.expect("a probe finds it back").epoch, 7);
    assert!(c.down_for().is_none());
}
