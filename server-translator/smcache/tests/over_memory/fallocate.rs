//! fallocate: the stat always goes; a punch or a zeroing drops the blocks
//! its extents cover inside the old size (a delete, never a rewrite); an
//! allocation changes no block — all confirmed before the call returns.

use crate::support::{fid, pattern, Stack};
use testkit::View;
use xlator::*;

const BS: u32 = 4096;

fn mode(linux: i32) -> FallocMode {
    FallocMode::from_linux(linux).unwrap()
}

/// A file of five blocks whose blocks and stat the bank holds.
async fn cached_file(s: &Stack, v: &View) -> Loc {
    let f = s.create("f").await;
    s.sm.write(&f, 0, pattern(5 * BS as usize, 1)).await.unwrap();
    assert!((0..5).all(|n| v.block(fid(&f), n).is_some()), "a write stores the blocks it covers");
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    f
}

#[tokio::test]
async fn a_punch_drops_the_stat_and_every_block_it_touches_before_answering() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = cached_file(&s, &v).await;
    // two extents (as stripe sends a server its units): part of block 0,
    // and from inside block 2 to past the end of the file
    let ranges = [Extent { offset: 100, len: 200 }, Extent { offset: 2 * BS as u64 + 5, len: 10 * BS as u64 }];
    s.sm.fallocate(&f, mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE), &ranges).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)));
    let kept: Vec<bool> = (0..6).map(|n| v.block(fid(&f), n).is_some()).collect();
    assert_eq!(kept, [false, true, false, false, false, false]);
    assert_eq!(s.disk(&f, 0, 400).await[100..300], [0u8; 200][..]);
}

#[tokio::test]
async fn an_allocation_leaves_every_block_and_drops_the_stat() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = cached_file(&s, &v).await;
    let a = s.sm.fallocate(&f, mode(0), &[Extent { offset: BS as u64, len: 10 * BS as u64 }]).await.unwrap();
    assert_eq!(a.size, 11 * BS as u64);
    assert!(!v.has_stat_key(fid(&f)));
    assert!((0..5).all(|n| v.block(fid(&f), n).is_some()), "no byte changed");
}

#[tokio::test]
async fn a_file_whose_blocks_were_never_stored_needs_no_block_deletes() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.make("fresh").await;
    s.sm.write(&f, 0, pattern(3 * BS as usize, 2)).await.unwrap();
    s.sm.fallocate(&f, mode(libc::FALLOC_FL_ZERO_RANGE), &[Extent { offset: 10, len: 3 * BS as u64 }]).await.unwrap();
    assert!((0..4).all(|n| v.block(fid(&f), n).is_none()));
    assert_eq!(s.disk(&f, 0, 10).await, pattern(10, 2));
    assert!(s.disk(&f, 10, 3 * BS as u64 + 10).await.iter().all(|&b| b == 0));
}
