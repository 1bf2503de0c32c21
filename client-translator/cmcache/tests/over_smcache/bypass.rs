//! When CMCache must not, or cannot, use the bank: it forwards, and the
//! answers stay the storage server's.

use crate::support::{counts, pattern, reached, Spec, Stack};
use bytes::Bytes;
use testkit::{eventually, NodeState, TestBank};
use xlator::*;

const BS: u32 = 8192;

/// Reads `data` from `f` `times` times through the first gateway; how many
/// reached the disk.
async fn reads_reaching_disk(s: &Stack, f: &Loc, data: &Bytes, times: usize) -> u64 {
    let before = s.calls(Fop::Read);
    for i in 0..times {
        let off = (i as u64 * 1000) % data.len() as u64;
        let got = s.gw().read(f, off, 3 * BS).await.unwrap();
        assert_eq!(got, data.slice(off as usize..(off as usize + 3 * BS as usize).min(data.len())));
    }
    s.calls(Fop::Read) - before
}

/// A block that does not fit in one stripe unit would span two storage
/// servers, and neither could keep it fresh: such blocks are never read.
#[tokio::test]
async fn a_block_size_that_does_not_divide_the_stripe_unit_means_no_bank_reads() {
    let s = Stack::start(Spec { block_size: BS, stripe_unit: Some(BS as u64 / 2), ..Spec::default() }).await;
    let data = pattern(6 * BS as usize, 1);
    let f = s.file("f", &data).await;
    assert_eq!(reads_reaching_disk(&s, &f, &data, 8).await, 8, "every read goes to the server");

    let s = Stack::start(Spec { block_size: BS, stripe_unit: Some(4 * BS as u64), ..Spec::default() }).await;
    let f = s.file("f", &data).await;
    assert_eq!(reads_reaching_disk(&s, &f, &data, 8).await, 0, "a dividing block size is served");
}

/// Every lookup, getattr and read reaches the disk exactly once.
async fn forwards_everything(s: &Stack) {
    let data = pattern(3 * BS as usize, 2);
    let f = s.file("f", &data).await;
    for _ in 0..3 {
        let before = counts(s);
        assert_eq!(s.gw().lookup(&Loc::root(), "f").await.unwrap().fid, f.fid.unwrap());
        assert_eq!(s.gw().getattr(&f).await.unwrap().size, data.len() as u64);
        assert_eq!(s.gw().read(&f, 0, 3 * BS).await.unwrap(), data);
        assert_eq!(reached(s, before), (1, 1, 1));
    }
}

#[tokio::test]
async fn no_config_under_the_lease_means_pass_through() {
    let s = Stack::start(Spec::default()).await;
    s.volume.set_gateway(None);
    forwards_everything(&s).await;
    // the storage server keeps its blocks; the gateway stored no stat or entry
    let (v, f) = (s.view(), s.disk().lookup(&Loc::root(), "f").await.unwrap().fid);
    assert!(!v.has_stat_key(f) && !v.has_stat_key(FileId::ROOT));
    assert_eq!(v.dentry(FileId::ROOT, "f"), None);
}

#[tokio::test]
async fn no_nodes_in_the_config_means_pass_through() {
    let bank = TestBank::start(1).await;
    let mut config = bank.config(BS);
    config.nodes.clear();
    let s = Stack::over(bank, config, Spec::default(), |sm| sm);
    forwards_everything(&s).await;
    assert_eq!(s.bank.items(), 0);
}

/// A node that died holds nothing: its keys are misses, the answers right.
#[tokio::test]
async fn a_dead_node_only_costs_misses() {
    let bank = TestBank::with(&[NodeState::Dead]).await;
    let config = bank.config(BS);
    forwards_everything(&Stack::over(bank, config, Spec::default(), |sm| sm)).await;

    // one live node of two: what lands on it is served, the rest forwarded
    let bank = TestBank::with(&[NodeState::Live, NodeState::Dead]).await;
    let config = bank.config(4096);
    let s = Stack::over(bank, config, Spec::default(), |sm| sm);
    let data = pattern(16 * 4096, 3);
    let f = s.file("f", &data).await;
    for _ in 0..3 {
        assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
        assert_eq!(s.gw().getattr(&f).await.unwrap().size, data.len() as u64);
    }
    s.bank.kill(0).await;
    s.gw().write(&f, 0, Bytes::from_static(b"after")).await.unwrap();
    assert_eq!(&s.gw().read(&f, 0, 5).await.unwrap()[..], b"after");
}

/// A damaged value, or another program's value under our key, is a miss.
#[tokio::test]
async fn corrupt_or_foreign_values_are_misses() {
    let s = Stack::start(Spec { block_size: 4096, ..Spec::default() }).await;
    let data = pattern(3 * 4096, 4);
    let f = s.file("f", &data).await;
    let (v, fid) = (s.view(), f.fid.unwrap());
    v.put(v.keys.stat(fid), Bytes::from_static(b"not an IMCa value")).await;
    let foreign = cache_bank::value::encode(cache_bank::value::Kind::Block, "some other key", &[0xee; 4096]);
    v.put(v.keys.block(fid, 0), foreign).await;
    v.put(v.keys.block(fid, 1), Bytes::from_static(b"IM\x01Bgarbage")).await;
    for _ in 0..2 {
        assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
        assert_eq!(s.gw().getattr(&f).await.unwrap().size, data.len() as u64);
    }
}

/// The attack of issue 13: values written straight to the bank under the
/// right keys — a stat that opens a 0600 file, a block of other content —
/// framed the old way (CRC, computable by anyone) or MAC'd under another
/// volume's key. The bank's key refuses both: the gateways answer from the
/// storage server, and once the forgeries are replaced, from the bank again.
#[tokio::test]
async fn forged_values_under_the_right_keys_are_misses() {
    use cache_bank::value::{self, Kind};
    let s = Stack::start(Spec { block_size: 4096, ..Spec::default() }).await;
    let data = pattern(2 * 4096, 9);
    let f = s.file("f", &data).await;
    let fid = f.fid.unwrap();
    s.gw().setattr(&f, &SetAttr { perm: Some(0o600), ..Default::default() }).await.unwrap();
    let truth = s.gw().getattr(&f).await.unwrap();
    assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
    let v = s.view();
    let (skey, bkey) = (v.keys.stat(fid), v.keys.block(fid, 0));
    let other = cache_bank::Codec::new(Some(secret_key_of_another_volume()), false, Default::default());
    let forged_attr = Attr { perm: 0o644, uid: 1001, ..truth.clone() };
    for (stat, block) in [
        (value::encode(Kind::Stat, &skey.key, &value::attr_payload(&forged_attr)), value::encode(Kind::Block, &bkey.key, &[0xee; 4096])),
        (other.encode(Kind::Stat, &skey.key, &value::attr_payload(&forged_attr)), other.encode(Kind::Block, &bkey.key, &[0xee; 4096])),
    ] {
        v.put(skey.clone(), stat).await;
        v.put(bkey.clone(), block).await;
        assert_eq!(s.gw().getattr(&f).await.unwrap(), truth, "the forged stat is refused");
        assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data, "the forged block is refused");
    }
    // refused values were deleted: the next stat miss repopulates, and the
    // server's populate of the block lands again
    s.gw().getattr(&f).await.unwrap();
    eventually("a real block again", || v.block(fid, 0).is_some()).await;
    let before = counts(&s);
    assert_eq!(s.gw().read(&f, 0, data.len() as u32).await.unwrap(), data);
    assert_eq!(s.gw().getattr(&f).await.unwrap(), truth);
    assert_eq!(reached(&s, before), (0, 0, 0), "served from the bank again");
}

fn secret_key_of_another_volume() -> secret::Key {
    secret::Key::from_raw([0x17; 32])
}

/// A new epoch names every key anew: nothing cached under the old one is
/// read again.
#[tokio::test]
async fn a_new_epoch_starts_from_an_empty_cache() {
    let s = Stack::start(Spec::default()).await;
    let data = pattern(2 * BS as usize, 5);
    let f = s.file("f", &data).await;
    s.gw().getattr(&f).await.unwrap();
    let warm = counts(&s);
    s.gw().getattr(&f).await.unwrap();
    s.gw().read(&f, 0, 2 * BS).await.unwrap();
    assert_eq!(reached(&s, warm), (0, 0, 0));

    s.volume.set(s.volume.next(|_| {}));
    let before = counts(&s);
    assert_eq!(s.gw().getattr(&f).await.unwrap().size, data.len() as u64);
    assert_eq!(s.gw().read(&f, 0, 2 * BS).await.unwrap(), data);
    assert_eq!(reached(&s, before), (1, 1, 0), "both miss under the new epoch");
    let v = s.view();
    eventually("the new epoch's blocks", || v.block(f.fid.unwrap(), 1).is_some()).await;
}
