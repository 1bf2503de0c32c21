//! No cache, a dead node, a frozen one: SMCache passes through, costs
//! misses, or has the node fenced — the file operation itself always
//! succeeds as the disk says.

use crate::support::{fid, opts, pattern, Stack};
use bytes::Bytes;
use smcache::SmOptions;
use std::time::{Duration, Instant};
use testkit::{new_file, NodeState, TestBank};
use xlator::*;

const BS: u32 = 4096;

/// Run `op` and check it reached the leaf as exactly one call of `want`.
async fn one_leaf_call<T>(s: &Stack, want: Fop, op: impl std::future::Future<Output = FsResult<T>>) -> T {
    let (before, total) = (s.leaf.calls(want), s.leaf.total_calls());
    let r = op.await.unwrap();
    assert_eq!((s.leaf.calls(want) - before, s.leaf.total_calls() - total), (1, 1), "{} passes straight through", want.name());
    r
}

async fn pass_through(s: &Stack) {
    let root = Loc::root();
    let x = &s.sm;
    let f = new_file("f");
    one_leaf_call(s, Fop::Create, x.create(&root, &f, libc::O_RDWR | libc::O_CREAT)).await;
    // by path only: with a cache SMCache would look up the id first
    let by_path = Loc::new("f", None);
    one_leaf_call(s, Fop::Write, x.write(&by_path, 0, pattern(3 * BS as usize, 1))).await;
    one_leaf_call(s, Fop::Read, x.read(&by_path, 0, BS)).await;
    one_leaf_call(s, Fop::Setattr, x.setattr(&by_path, &SetAttr { size: Some(10), ..Default::default() })).await;
    one_leaf_call(s, Fop::Open, x.open(&by_path, libc::O_WRONLY | libc::O_TRUNC)).await;
    one_leaf_call(s, Fop::Setxattr, x.setxattr(&by_path, "user.a", b"1", XattrFlags::default())).await;
    one_leaf_call(s, Fop::Mkdir, x.mkdir(&root, &new_file("d"))).await;
    one_leaf_call(s, Fop::Rename, x.rename(&root, "f", &Loc::new("d", None), "g", RenameFlags::default())).await;
    one_leaf_call(s, Fop::Unlink, x.unlink(&Loc::new("d", None), "g")).await;
    assert_eq!(s.bank.items(), 0, "nothing was stored");
}

#[tokio::test]
async fn no_nodes_means_pass_through() {
    let bank = TestBank::start(1).await;
    let mut config = bank.config(BS);
    config.nodes.clear();
    pass_through(&Stack::over(bank, config, opts())).await;
}

#[tokio::test]
async fn an_unusable_block_size_means_pass_through() {
    let bank = TestBank::start(1).await;
    let mut config = bank.config(BS);
    config.block_size = 1000;
    pass_through(&Stack::over(bank, config, opts())).await;
}

/// Mutations wait for confirmation, but a refused connection proves the
/// node empty: nothing is waited for, nothing fails.
#[tokio::test]
async fn a_dead_node_only_costs_misses() {
    let bank = TestBank::with(&[NodeState::Live, NodeState::Dead]).await;
    let config = bank.config(BS);
    // a mutation that waited on the dead node would take this long
    let s = Stack::over(bank, config, SmOptions { deadline: Duration::from_secs(60), ..opts() });
    let v = s.view();
    let started = Instant::now();
    let f = s.create("f").await;
    let data = pattern(16 * BS as usize, 2);
    s.sm.write(&f, 0, data.clone()).await.unwrap();
    let on_live = (0..16).filter(|&n| v.block(fid(&f), n).is_some()).count();
    assert!(on_live > 0 && on_live < 16, "blocks on the live node are stored ({on_live} of 16)");
    assert_eq!(s.sm.read(&f, 0, 16 * BS).await.unwrap(), data);
    s.sm.setattr(&f, &SetAttr { size: Some(BS as u64), ..Default::default() }).await.unwrap();
    s.sm.rename(&Loc::root(), "f", &Loc::root(), "g", RenameFlags::default()).await.unwrap();

    // the live node dies too
    s.bank.kill(0).await;
    s.sm.write(&f, 0, Bytes::from_static(b"after")).await.unwrap();
    assert_eq!(&s.sm.read(&f, 0, 5).await.unwrap()[..], b"after");
    s.sm.unlink(&Loc::root(), "g").await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(30), "a dead node was waited for");
}

/// A node that accepts but never answers cannot confirm: SMCache asks for
/// it to be fenced, and answers the mutation once a config without it is
/// in force and the old one's lease has run out.
#[tokio::test]
async fn a_silent_node_is_fenced_before_the_mutation_is_answered() {
    let bank = TestBank::with(&[NodeState::Silent]).await;
    let silent = bank.addr(0);
    let mut config = bank.config(BS);
    config.lease_ms = 50;
    let s = Stack::over(bank, config, SmOptions { deadline: Duration::from_millis(200), ..opts() });
    let leaf: &dyn Translator = &*s.leaf;
    let f = new_file("f");
    leaf.create(&Loc::root(), &f, libc::O_RDWR | libc::O_CREAT).await.unwrap();

    let loc = testkit::at("f", f.fid);
    let write = s.sm.write(&loc, 0, Bytes::from_static(b"data"));
    let gateway = async {
        // play the gateways' part: fence what the server asks for
        testkit::eventually("a fence request", || s.fences.open(&s.volume.config()) == vec![silent.clone()]).await;
        s.volume.set(s.volume.next(|c| {
            c.nodes.clear();
            c.fenced = vec![silent.clone()];
        }));
    };
    let (r, ()) = tokio::join!(write, gateway);
    assert_eq!(r.unwrap().written, 4);
    assert!(s.fences.open(&s.volume.config()).is_empty(), "the request is done once the node is out");
    assert_eq!(&s.sm.read(&loc, 0, 10).await.unwrap()[..], b"data");
}
