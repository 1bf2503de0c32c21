//! Server-side copies: to the bank, a copy is a write of the destination
//! whose bytes SMCache never holds, so it drops the blocks the copy covers
//! (and the stat) before answering; a file made here has none to drop, and
//! its copied blocks are put when it is closed, as its written ones.

use crate::support::{fid, pattern, Stack};
use xlator::*;

const BS: u32 = 4096;

#[tokio::test]
async fn a_copy_drops_the_destinations_covered_blocks_and_stat_before_answering() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let (src, dst) = (s.create("src").await, s.create("dst").await);
    s.sm.write(&src, 0, pattern(4 * BS as usize, 1)).await.unwrap();
    s.sm.write(&dst, 0, pattern(6 * BS as usize, 2)).await.unwrap();
    v.put_stat(&s.sm.getattr(&dst).await.unwrap()).await;
    assert!((0..6).all(|n| v.block(fid(&dst), n).is_some()));

    // [BS, 3 BS + 10) of dst: blocks 1, 2 and 3 (partly)
    let span = CopySpan { src: 0, dst: BS as u64, len: 2 * BS as u64 + 10 };
    let r = s.sm.copy_range(&src, &dst, &[span]).await.unwrap();
    assert_eq!(r.written as u64, span.len);

    assert!(!v.has_stat_key(fid(&dst)), "the stat is dropped before the copy is answered");
    assert!((1..4).all(|n| v.block(fid(&dst), n).is_none()), "the covered blocks are dropped");
    assert!([0, 4, 5].iter().all(|&n| v.block(fid(&dst), n).is_some()), "the others are not touched");
    assert!((0..4).all(|n| v.block(fid(&src), n).is_some()), "the source's blocks stay");
    assert_eq!(s.disk(&dst, BS as u64, 3 * BS as u64 + 10).await, s.disk(&src, 0, 2 * BS as u64 + 10).await);
}

#[tokio::test]
async fn a_copy_into_a_file_made_here_is_put_at_close() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let fresh = || s.sm.inner().metrics().cache_ops.with_label_values(&["update", "fresh"]).get();
    let src = s.on_disk("src", &pattern(3 * BS as usize, 3)).await;
    let f = s.make("f").await;
    s.sm.copy_range(&src, &f, &[CopySpan { src: 0, dst: 0, len: 2 * BS as u64 }]).await.unwrap();
    assert_eq!(fresh(), 2, "nothing stored to drop");
    assert_eq!(s.bank.items(), 0);

    s.sm.release(&f).await.unwrap();
    testkit::eventually("the put at close", || v.block(fid(&f), 1).is_some()).await;
    assert_eq!(v.block(fid(&f), 0).unwrap(), s.disk(&src, 0, BS as u64).await);
}
