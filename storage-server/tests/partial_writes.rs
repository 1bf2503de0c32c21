//! Two real storage servers on small tmpfs exports, striped by the gateway's
//! stripe translator over real protocol clients: a write that fills one
//! server answers the prefix that landed and leaves no zero-filled units —
//! the cut back runs over the wire, on each server's own old size
//! (`WriteReply::size_before`, which travels in the reply).

mod common;
use bytes::Bytes;
use common::*;
use std::sync::Arc;
use xlator::*;

const UNIT: u64 = 64 * 1024;

fn old_byte(x: u64) -> u8 {
    (x % 127) as u8 + 1
}

fn new_byte(x: u64) -> u8 {
    (x % 127) as u8 + 128
}

/// Fill the file system under `dir`, then free `leave` bytes of it.
fn fill_leaving(dir: &std::path::Path, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = vec![0x55u8; 64 * 1024];
    let mut len = 0u64;
    while let Ok(n @ 1..) = f.write(&chunk) {
        len += n as u64;
    }
    f.set_len(len.saturating_sub(leave)).unwrap();
}

#[tokio::test]
async fn a_striped_write_that_fills_a_server_leaves_no_zeroed_units() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Vec<Tmpfs> = (0..2).map(|i| Tmpfs::mount(&dir.path().join(format!("s{i}")), "4m")).collect();
    let mut servers = Vec::new();
    let mut clients: Vec<Next> = Vec::new();
    for f in &fs {
        let s = storage_server::start(args(&f.0)).await.unwrap();
        clients.push(Arc::new(protocol_client::connect(&s.addr.to_string(), opts()).await.unwrap()));
        servers.push(s);
    }
    let s = stripe::Stripe::new(clients.clone(), UNIT).unwrap();
    let a = s.create(&root(), &nf("f"), libc::O_RDWR).await.unwrap().attr;
    let l = at("f", a.fid);
    let old: Vec<u8> = (0..4 * UNIT).map(old_byte).collect();
    s.write(&l, 0, Bytes::from(old.clone())).await.unwrap();
    // Each server says its copy's size before a write, over the wire.
    let w = clients[1].write(&l, UNIT, Bytes::from(old[UNIT as usize..2 * UNIT as usize].to_vec())).await.unwrap();
    assert_eq!(w.size_before, Some(4 * UNIT), "server 1's copy ends with unit 3");

    fill_leaving(&fs[1].0, UNIT / 2);
    let (off, len) = (2 * UNIT, 8 * UNIT);
    let r = s.write(&l, off, Bytes::from((off..off + len).map(new_byte).collect::<Vec<u8>>())).await;
    let n = r.expect("a short count, not an error").written as u64;
    assert!(n > 0 && n < len, "{n}");
    let size = s.getattr(&l).await.unwrap().size;
    assert_eq!(size, (4 * UNIT).max(off + n), "old size or offset + count");
    let back = s.read(&l, 0, (size + UNIT) as u32).await.unwrap();
    assert_eq!(back.len() as u64, size);
    for (x, &b) in back.iter().enumerate() {
        let x = x as u64;
        if x < off {
            assert_eq!(b, old_byte(x), "byte {x}");
        } else if x < off + n {
            assert_eq!(b, new_byte(x), "byte {x} is counted, so it is new data");
        } else {
            assert!(b == old_byte(x) || b == new_byte(x), "byte {x} past the count is {b}");
        }
    }
    // No server copy holds anything past that size.
    for c in &clients {
        assert!(c.getattr(&l).await.unwrap().size <= size);
    }
    drop(clients);
    for s in servers {
        s.shutdown().await;
    }
    drop(fs);
}
