//! Reads populate: SMCache reads whole covering blocks from disk, answers
//! the range asked for, and queues the blocks with `add` (a value already
//! there — written after our disk read — wins). Populates are not waited
//! for, so these tests wait for them to land; with one node everything
//! travels on one ordered connection, so "the last key of a batch is
//! there" means the whole batch was applied.

use crate::support::{fid, opts, pattern, Stack};
use async_trait::async_trait;
use std::sync::Arc;
use testkit::{eventually, TestBank};
use xlator::*;

const BS: u32 = 4096;

#[tokio::test]
async fn a_read_answers_its_range_and_populates_whole_blocks_with_add() {
    let s = Stack::start(1, BS).await;
    let v = s.view();
    let data = pattern(3 * BS as usize + 500, 1);
    let f = s.on_disk("f", &data).await;
    v.put_block(fid(&f), 0, b"written after the read's disk read").await;

    let got = s.sm.read(&f, 100, 4 * BS).await.unwrap();
    assert_eq!(got, data.slice(100..), "the range asked for, short at EOF");
    eventually("the populate", || v.block(fid(&f), 3).is_some()).await;
    assert_eq!(&v.block(fid(&f), 0).unwrap()[..], b"written after the read's disk read", "add never overwrites");
    assert_eq!(v.block(fid(&f), 1).unwrap(), data.slice(4096..8192));
    assert_eq!(v.block(fid(&f), 2).unwrap(), data.slice(8192..12_288));
    assert_eq!(v.block(fid(&f), 3).unwrap(), data.slice(12_288..), "the last block is short");
}

#[tokio::test]
async fn blocks_past_the_end_are_stored_empty() {
    let s = Stack::start(1, BS).await;
    let v = s.view();
    let f = s.on_disk("f", &pattern(BS as usize / 2, 2)).await;
    assert_eq!(s.sm.read(&f, 0, 3 * BS).await.unwrap().len(), BS as usize / 2);
    eventually("the populate", || v.block(fid(&f), 2).is_some()).await;
    assert_eq!(v.block(fid(&f), 1).unwrap().len(), 0, "an empty block says: end of file before here");
    assert_eq!(v.block(fid(&f), 2).unwrap().len(), 0);
}

#[tokio::test]
async fn reads_wider_than_the_populate_limit_or_without_an_id_pass_through() {
    let s = Stack::start(1, BS).await;
    let v = s.view();
    let big = s.on_disk("big", &vec![3u8; 9 << 20]).await;
    let small = s.on_disk("small", &pattern(100, 4)).await;
    let reads = s.leaf.calls(Fop::Read);
    assert_eq!(s.sm.read(&big, 0, 9 << 20).await.unwrap().len(), 9 << 20);
    assert_eq!(s.sm.read(&Loc::new("small", None), 0, 100).await.unwrap().len(), 100);
    assert_eq!(s.leaf.calls(Fop::Read), reads + 2);
    // a populating read after them, on the same connection: once its block
    // is there, anything queued before it would be too
    s.sm.read(&small, 0, 10).await.unwrap();
    eventually("the small file's populate", || v.block(fid(&small), 0).is_some()).await;
    assert_eq!(s.bank.items(), 1, "only the last read populated anything");
}

/// A leaf whose reads take a while: other calls run between a read's disk
/// access and its answer.
struct SlowReads(Next);

#[async_trait]
impl Translator for SlowReads {
    fn name(&self) -> &str {
        "slow-reads"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.0)
    }

    async fn read(&self, loc: &Loc, offset: u64, size: u32) -> FsResult<Data> {
        let d = self.0.read(loc, offset, size).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        d
    }
}

/// A populate carries what the disk held when it was read. A truncate that
/// lands between that disk read and the populate deletes the blocks; the
/// populate must not bring them back (the file's lock orders the two).
#[tokio::test]
async fn a_populate_read_before_a_truncate_never_lands_after_it() {
    let bank = TestBank::start(1).await;
    let config = bank.config(BS);
    let s = Stack::over_with(bank, config, opts(), |leaf| Arc::new(SlowReads(leaf)));
    let v = s.view();
    let f = s.on_disk("f", &pattern(2 * BS as usize, 5)).await;
    let truncate = SetAttr { size: Some(0), ..Default::default() };
    let (r, t) = tokio::join!(s.sm.read(&f, 0, 2 * BS), s.sm.setattr(&f, &truncate));
    assert!(matches!(r.unwrap().len(), 0 | 8192));
    t.unwrap();
    // a confirmed update on the same (only) connection: everything queued
    // before it has been applied
    s.sm.setxattr(&f, "user.barrier", b"", XattrFlags::default()).await.unwrap();
    assert_eq!(v.block(fid(&f), 0), None, "a block of the truncated file came back");
    assert_eq!(v.block(fid(&f), 1), None);
}
