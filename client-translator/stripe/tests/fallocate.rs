//! A striped fallocate (memory leaves, which count the calls they get):
//! each server is sent only the extents it holds, a server holding none of
//! the range is sent no fallocate, the bytes and the merged size come out
//! as Linux's, and a punch to the largest offset is clipped to the file.

use bytes::Bytes;
use std::sync::Arc;
use stripe::Stripe;
use xlator::*;

const UNIT: u64 = 4096;

fn byte(x: u64) -> u8 {
    (x % 251) as u8 + 1
}

/// A file of `size` known bytes over three memory leaves.
async fn striped_file(size: u64) -> (Stripe, Vec<Arc<memory::Memory>>, Loc) {
    let leaves: Vec<Arc<memory::Memory>> = (0..3).map(|_| memory::memory()).collect();
    let s = Stripe::new(leaves.iter().map(|m| m.clone() as Next).collect(), UNIT).unwrap();
    let fid = FileId::from_random(0x5eed);
    let new = NewFile { name: "f".into(), fid, perm: 0o644, owner: Owner::default(), exclusive: true };
    s.create(&Loc::root(), &new, libc::O_RDWR).await.unwrap();
    let loc = Loc::new("f", Some(fid));
    let data: Vec<u8> = (0..size).map(byte).collect();
    assert_eq!(s.write(&loc, 0, Bytes::from(data)).await.unwrap().written as u64, size);
    (s, leaves, loc)
}

fn fallocates(leaves: &[Arc<memory::Memory>]) -> Vec<u64> {
    leaves.iter().map(|m| m.calls(Fop::Fallocate)).collect()
}

async fn contents(s: &Stripe, loc: &Loc) -> Vec<u8> {
    let size = s.getattr(loc).await.unwrap().size;
    s.read(loc, 0, size as u32).await.unwrap().to_vec()
}

fn mode(linux: i32) -> FallocMode {
    FallocMode::from_linux(linux).unwrap()
}

#[tokio::test]
async fn a_range_inside_one_unit_reaches_only_its_server() {
    let (s, leaves, loc) = striped_file(10 * UNIT).await;
    let punch = mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE);
    let a = s.fallocate(&loc, punch, &[Extent { offset: UNIT + 10, len: 100 }]).await.unwrap();
    assert_eq!(fallocates(&leaves), [0, 1, 0]);
    assert_eq!(a.size, 10 * UNIT, "the answer is the whole file's, merged");
    let got = contents(&s, &loc).await;
    let want: Vec<u8> = (0..10 * UNIT).map(|x| if (UNIT + 10..UNIT + 110).contains(&x) { 0 } else { byte(x) }).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn each_server_gets_one_call_with_its_extents_and_the_size_is_linuxs() {
    let (s, leaves, loc) = striped_file(5 * UNIT + 7).await;
    // zero from inside unit 1 to past the end, without keep-size: grows
    let (off, len) = (UNIT + 100, 6 * UNIT);
    let a = s.fallocate(&loc, mode(libc::FALLOC_FL_ZERO_RANGE), &[Extent { offset: off, len }]).await.unwrap();
    assert_eq!(fallocates(&leaves), [1, 1, 1]);
    assert_eq!(a.size, off + len);
    let got = contents(&s, &loc).await;
    assert_eq!(got.len() as u64, off + len);
    assert!(got[..off as usize].iter().enumerate().all(|(i, &b)| b == byte(i as u64)));
    assert!(got[off as usize..].iter().all(|&b| b == 0));
    // allocating with keep-size past the end changes neither bytes nor size
    let a = s.fallocate(&loc, mode(libc::FALLOC_FL_KEEP_SIZE), &[Extent { offset: 0, len: 100 * UNIT }]).await.unwrap();
    assert_eq!(a.size, off + len);
    assert_eq!(contents(&s, &loc).await, got);
}

#[tokio::test]
async fn a_punch_to_the_largest_offset_is_clipped_to_the_file() {
    let (s, leaves, loc) = striped_file(3 * UNIT).await;
    let punch = mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE);
    let a = s.fallocate(&loc, punch, &[Extent { offset: 10, len: i64::MAX as u64 - 10 }]).await.unwrap();
    assert_eq!(a.size, 3 * UNIT);
    assert_eq!(fallocates(&leaves), [1, 1, 1]);
    let got = contents(&s, &loc).await;
    assert_eq!(got[..10], (0..10).map(byte).collect::<Vec<_>>()[..]);
    assert!(got[10..].iter().all(|&b| b == 0));
}
