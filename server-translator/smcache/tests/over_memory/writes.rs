//! Data mutations: writes rewrite the blocks they cover, size changes drop
//! the blocks past the new end, every change drops the file's stat — all
//! confirmed by the bank before the call returns.

use crate::support::{fid, opts, pattern, Stack};
use bytes::Bytes;
use smcache::SmOptions;
use testkit::{at, path, TestBank};
use xlator::*;

const BS: u32 = 4096;

#[tokio::test]
async fn a_write_rewrites_every_covering_block_and_drops_the_stat_before_answering() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.create("f").await;
    let junk = b"junk from an earlier layout of this file";
    for n in 0..4 {
        v.put_block(fid(&f), n, junk).await;
    }
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;

    // [1000, 11000): block 0 partly, block 1 whole, block 2 partly (to EOF)
    let data = pattern(10_000, 1);
    let r = s.sm.write(&f, 1000, data.clone()).await.unwrap();
    assert_eq!(r.written, 10_000);

    assert!(!v.has_stat_key(fid(&f)), "the stat is dropped before the write is answered");
    assert_eq!(v.block(fid(&f), 0).unwrap(), s.disk(&f, 0, 4096).await, "a partial block is read back from disk");
    assert_eq!(v.block(fid(&f), 1).unwrap(), data.slice(3096..7192), "a whole block comes from the payload");
    assert_eq!(v.block(fid(&f), 2).unwrap(), s.disk(&f, 8192, 12_288).await, "the last block ends at EOF");
    assert_eq!(v.block(fid(&f), 2).unwrap().len(), 11_000 - 8192);
    assert_eq!(&v.block(fid(&f), 3).unwrap()[..], junk, "a block the write does not cover is not touched");
}

#[tokio::test]
async fn a_write_by_path_still_keys_blocks_by_file_id() {
    let s = Stack::start(1, BS).await;
    let f = s.create("f").await;
    s.sm.write(&path("f"), 0, pattern(BS as usize, 2)).await.unwrap();
    assert_eq!(s.view().block(fid(&f), 0).unwrap(), pattern(BS as usize, 2));
}

#[tokio::test]
async fn a_shrink_drops_the_blocks_past_the_new_end() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.create("f").await;
    s.sm.write(&f, 0, pattern(5 * BS as usize, 3)).await.unwrap();
    assert!((0..5).all(|n| v.block(fid(&f), n).is_some()), "a write stores the blocks it covers");

    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.setattr(&f, &SetAttr { size: Some(BS as u64 + 100), ..Default::default() }).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)));
    assert!(v.block(fid(&f), 0).is_some(), "a block wholly before the new end stays");
    assert!((1..5).all(|n| v.block(fid(&f), n).is_none()), "the block holding the new end and all after go");

    // growing changes no block (they are all still right), only the stat
    s.sm.write(&f, 0, pattern(3 * BS as usize, 4)).await.unwrap();
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.setattr(&f, &SetAttr { size: Some(10 * BS as u64), ..Default::default() }).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)));
    assert!((0..3).all(|n| v.block(fid(&f), n).is_some()));
}

#[tokio::test]
async fn truncating_opens_and_creates_drop_every_block() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.create("f").await;
    let fill = |seed| pattern(3 * BS as usize, seed);

    s.sm.write(&f, 0, fill(5)).await.unwrap();
    s.sm.open(&f, libc::O_RDONLY | libc::O_TRUNC).await.unwrap();
    assert!((0..3).all(|n| v.block(fid(&f), n).is_some()), "O_TRUNC without write access truncates nothing");
    s.sm.open(&f, libc::O_WRONLY | libc::O_TRUNC).await.unwrap();
    assert!((0..3).all(|n| v.block(fid(&f), n).is_none()));

    s.sm.write(&f, 0, fill(6)).await.unwrap();
    let again = NewFile { exclusive: false, ..testkit::new_file("f") };
    let a = s.sm.create(&Loc::root(), &again, libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC).await.unwrap().attr;
    assert_eq!((a.fid, a.size), (fid(&f), 0), "creating an existing name opens it");
    assert!((0..3).all(|n| v.block(fid(&f), n).is_none()));
}

#[tokio::test]
async fn attribute_and_xattr_changes_drop_the_stat() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.create("f").await;
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.setattr(&f, &SetAttr { perm: Some(0o600), ..Default::default() }).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)), "setattr leaves the stat in the bank");
    // (a gateway's populate follows its getattr: the server knows the key
    // may hold a value again)
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.setxattr(&f, "user.k", b"v", XattrFlags::default()).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)), "setxattr leaves the stat in the bank");
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.removexattr(&f, "user.k").await.unwrap();
    assert!(!v.has_stat_key(fid(&f)), "removexattr leaves the stat in the bank");
}

/// The dissertation's threaded mode: a write deletes its blocks before it
/// answers and puts them back afterwards. A reader may see a miss, never
/// the blocks from before the write.
#[tokio::test]
async fn threaded_mode_deletes_then_repopulates_never_stale() {
    let bank = TestBank::start(2).await;
    let config = bank.config(BS);
    let s = Stack::over(bank, config, SmOptions { threaded: true, ..opts() });
    let v = s.view();
    let f = s.create("f").await;
    s.sm.write(&f, 0, pattern(4 * BS as usize, 7)).await.unwrap();
    testkit::eventually("the first write's blocks", || (0..4).all(|n| v.block(fid(&f), n).is_some())).await;

    let new = pattern(4 * BS as usize, 8);
    s.sm.write(&f, 0, new.clone()).await.unwrap();
    let want = |n: u64| new.slice((n * BS as u64) as usize..((n + 1) * BS as u64) as usize);
    testkit::eventually("the rewritten blocks", || {
        (0..4).all(|n| match v.block(fid(&f), n) {
            None => false,
            Some(b) => {
                assert_eq!(b, want(n), "block {n} from before the write");
                true
            }
        })
    })
    .await;
}

/// After a config change (new epoch and block size) gateways may read the
/// old epoch's keys until their lease runs out, so a mutation deletes those
/// too, mapped onto the old block size.
#[tokio::test]
async fn a_mutation_deletes_the_previous_epochs_keys_within_a_lease() {
    let s = Stack::start(2, BS).await;
    let mut long = s.volume.config();
    long.lease_ms = 60_000;
    s.volume.set(long);
    let old = s.view();
    let f = s.create("f").await;
    s.sm.write(&f, 0, pattern(4 * BS as usize, 9)).await.unwrap();
    old.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    assert!((0..4).all(|n| old.block(fid(&f), n).is_some()));

    s.volume.set_server(s.volume.next(|c| c.block_size = 2 * BS));
    let new = s.view();
    s.sm.write(&f, 2 * BS as u64 + 10, Bytes::from_static(b"x")).await.unwrap();
    assert!(!old.has_stat_key(fid(&f)), "the old epoch's stat goes too");
    assert!(old.block(fid(&f), 2).is_none() && old.block(fid(&f), 3).is_none(), "both old blocks under new block 1");
    assert!(old.block(fid(&f), 0).is_some() && old.block(fid(&f), 1).is_some(), "old blocks the write misses stay");
    assert_eq!(new.block(fid(&f), 1).unwrap(), s.disk(&at("f", fid(&f)), 2 * BS as u64, 4 * BS as u64).await);
}

/// A stat key this server deleted, and that no getattr or lookup could have
/// led a gateway to refill since, is not deleted again: a run of mutations
/// of one file (an untar's `fchown`, `fchmod`, `utimensat`) costs one bank
/// delete, not one each. A read in between makes the next mutation delete
/// again, and what it refilled never outlives that mutation.
#[tokio::test]
async fn a_stat_no_read_could_have_refilled_is_not_deleted_again() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let f = s.create("f").await;
    let skipped = || s.sm.inner().metrics().cache_ops.with_label_values(&["invalidate", "known_empty"]).get();
    let chmod = |m: u32| {
        let (s, f) = (&s, &f);
        async move { s.sm.setattr(f, &SetAttr { perm: Some(m), ..Default::default() }).await }
    };
    chmod(0o600).await.unwrap();
    assert_eq!(skipped(), 0, "the first delete is sent");
    chmod(0o640).await.unwrap();
    chmod(0o644).await.unwrap();
    assert_eq!(skipped(), 2, "the key is known empty after the first");
    // A gateway's populate: getattr, then the value lands.
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    chmod(0o600).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)), "after a read, the next mutation deletes again");
    assert_eq!(skipped(), 2);
    // A lookup too (the file's id is known only from its answer).
    s.sm.lookup(&Loc::root(), "f").await.unwrap();
    v.put_stat(&s.sm.getattr(&f).await.unwrap()).await;
    s.sm.setxattr(&f, "user.k", b"v", XattrFlags::default()).await.unwrap();
    assert!(!v.has_stat_key(fid(&f)));
}

/// Stat deletes this server skipped, knowing the key empty.
fn skipped(s: &Stack) -> u64 {
    s.sm.inner().metrics().cache_ops.with_label_values(&["invalidate", "known_empty"]).get()
}

/// A file changed twice, so that its stat key is known empty (the second
/// delete was skipped), and the change to make again.
async fn known_empty() -> (Stack, Loc, SetAttr) {
    let s = Stack::start(1, BS).await;
    let f = s.create("f").await;
    let set = SetAttr { perm: Some(0o600), ..Default::default() };
    s.sm.setattr(&f, &set).await.unwrap();
    s.sm.setattr(&f, &set).await.unwrap();
    assert!(skipped(&s) >= 1, "the second delete was known unneeded");
    (s, f, set)
}

/// A listing's `getattrs` may feed a stat populate like a getattr: a
/// mutation after it deletes the stat key again.
#[tokio::test]
async fn getattrs_make_a_stat_delete_needed_again() {
    let (s, f, set) = known_empty().await;
    let skipped = || skipped(&s);
    let before = skipped();
    s.sm.getattrs(&[f.clone()]).await.unwrap();
    s.sm.setattr(&f, &set).await.unwrap();
    assert_eq!(skipped(), before, "after getattrs the stat key's delete is sent again");
}

/// So may a listing with attributes (CMCache fills the stats its bank
/// lacked from one); one without attributes may not.
#[tokio::test]
async fn listings_with_attributes_make_a_stat_delete_needed_again() {
    let (s, f, set) = known_empty().await;
    let skipped = || skipped(&s);
    let before = skipped();
    s.sm.readdir(&Loc::root(), 0, 100, false).await.unwrap();
    s.sm.setattr(&f, &set).await.unwrap();
    assert_eq!(skipped(), before + 1, "a listing without attributes feeds no stat");
    s.sm.readdir(&Loc::root(), 0, 100, true).await.unwrap();
    s.sm.setattr(&f, &set).await.unwrap();
    assert_eq!(skipped(), before + 1, "after a listing with attributes the stat key's delete is sent again");
}

/// A file made through this server has no block in the bank until one is
/// first stored: its writes leave the bank alone (no rewrite to wait for,
/// no read back), and a read then finds the disk's bytes. After the
/// first populate, writes rewrite as for any file.
#[tokio::test]
async fn a_file_made_here_is_not_rewritten_until_its_blocks_are_first_stored() {
    let s = Stack::start(2, BS).await;
    let v = s.view();
    let fresh = || s.sm.inner().metrics().cache_ops.with_label_values(&["update", "fresh"]).get();
    let f = s.make("f").await;
    let reads = s.leaf.calls(Fop::Read);
    s.sm.write(&f, 0, pattern(2 * BS as usize + 100, 1)).await.unwrap();
    s.sm.write(&f, 2 * BS as u64 + 100, pattern(50, 2)).await.unwrap();
    assert_eq!(fresh(), 4, "3 + 1 blocks left alone");
    assert_eq!(s.leaf.calls(Fop::Read), reads, "no partial block read back");
    assert_eq!(s.bank.items(), 0, "nothing stored");

    // a read stores the blocks (and ends the file's freshness first)
    let disk = s.disk(&f, 0, 3 * BS as u64).await;
    assert_eq!(s.sm.read(&f, 0, 3 * BS).await.unwrap(), disk);
    testkit::eventually("the populate", || v.block(fid(&f), 2).is_some()).await;
    let new = pattern(BS as usize, 3);
    s.sm.write(&f, BS as u64, new.clone()).await.unwrap();
    assert_eq!(v.block(fid(&f), 1).unwrap(), new, "rewritten once its blocks were stored");
    assert_eq!(fresh(), 4);

    // A create that opens an existing file (another id: the name was
    // taken) makes nothing new: its writes rewrite.
    let g = s.on_disk("g", &pattern(100, 4)).await;
    let opened = s.sm.create(&Loc::root(), &testkit::new_file("g"), libc::O_RDWR | libc::O_CREAT).await.unwrap().attr;
    assert_eq!(opened.fid, fid(&g));
    s.sm.write(&g, 0, pattern(10, 5)).await.unwrap();
    assert_eq!(v.block(fid(&g), 0).unwrap(), s.disk(&g, 0, BS as u64).await);
    assert_eq!(fresh(), 4);
}

/// Threaded mode: a write to a file made here deletes nothing and puts
/// nothing back.
#[tokio::test]
async fn threaded_mode_leaves_a_fresh_files_blocks_alone_too() {
    let bank = TestBank::start(1).await;
    let config = bank.config(BS);
    let s = Stack::over(bank, config, SmOptions { threaded: true, ..opts() });
    let f = s.make("f").await;
    let reads = s.leaf.calls(Fop::Read);
    s.sm.write(&f, 0, pattern(BS as usize / 2, 6)).await.unwrap();
    // a populating read after it, on the same connection: once its block is
    // there, a repopulate queued before it would have landed too
    let h = s.on_disk("h", &pattern(10, 7)).await;
    s.sm.read(&h, 0, 10).await.unwrap();
    testkit::eventually("the populate", || s.view().block(fid(&h), 0).is_some()).await;
    assert_eq!(s.bank.items(), 1, "only the other file's block");
    assert_eq!(s.leaf.calls(Fop::Read), reads + 1, "no repopulate read");
}
