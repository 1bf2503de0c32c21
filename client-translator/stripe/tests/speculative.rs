//! Creates ask server 0 and the followers at once (stripe's `create`
//! module): what a follower makes before server 0 decides is kept when
//! server 0 agrees, replaced when it decided otherwise, and left alone by
//! a heal while it may still be a create on its way to server 0.

use std::collections::BTreeMap;
use std::time::Duration;
use stripe::Stripe;
use xlator::*;

const UNIT: u64 = stripe::DEFAULT_STRIPE_UNIT;

fn nf(name: &str, id: u128, exclusive: bool) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(id), perm: 0o644, owner: Owner::default(), exclusive }
}

/// Every name in the root of one server, with its id.
async fn names(s: &Next) -> BTreeMap<String, FileId> {
    let page = s.readdir(&Loc::root(), 0, 1024, false).await.unwrap();
    page.into_iter().filter(|e| e.name != "." && e.name != "..").map(|e| (e.name, e.fid)).collect()
}

fn servers() -> (Next, Next) {
    (memory::memory(), memory::memory())
}

#[tokio::test]
async fn a_new_name_gets_the_gateways_id_everywhere() {
    let (m0, m1) = servers();
    let s = Stripe::new(vec![m0.clone(), m1.clone()], UNIT).unwrap();
    let root = Loc::root();
    assert_eq!(s.create(&root, &nf("f", 1, true), libc::O_RDWR).await.unwrap().attr.fid, FileId::from_random(1));
    assert_eq!(s.mkdir(&root, &nf("d", 2, true)).await.unwrap().attr.fid, FileId::from_random(2));
    assert_eq!(s.symlink(&root, &nf("l", 3, true), "t").await.unwrap().attr.fid, FileId::from_random(3));
    assert_eq!(s.mknod(&root, &nf("p", 4, true), libc::S_IFIFO | 0o644, 0).await.unwrap().attr.fid, FileId::from_random(4));
    assert_eq!(names(&m0).await, names(&m1).await);
    assert_eq!(names(&m0).await.len(), 4);
}

#[tokio::test]
async fn a_create_without_o_excl_opens_and_truncates_the_existing_file_everywhere() {
    let (m0, m1) = servers();
    let s = Stripe::new(vec![m0.clone(), m1.clone()], 4096).unwrap();
    let root = Loc::root();
    let a = s.create(&root, &nf("f", 1, true), libc::O_RDWR).await.unwrap().attr;
    let at = Loc { path: "f".into(), fid: Some(a.fid) };
    s.write(&at, 0, Data::from(vec![7u8; 3 * 4096])).await.unwrap();
    s.release(&at).await.unwrap();
    // Another id proposed: server 0's existing file wins on every server.
    let b = s.create(&root, &nf("f", 2, false), libc::O_RDWR | libc::O_TRUNC).await.unwrap().attr;
    assert_eq!(b.fid, a.fid);
    assert_eq!(b.size, 0);
    assert_eq!(m1.getattr(&at).await.unwrap().size, 0, "the follower's copy was truncated too");
    assert_eq!(names(&m0).await, names(&m1).await);
    // ... and an exclusive one fails, leaving the file as it was.
    assert_eq!(s.create(&root, &nf("f", 3, true), libc::O_RDWR).await.unwrap_err(), FsError::EEXIST);
    assert_eq!(names(&m0).await, names(&m1).await);
}

#[tokio::test]
async fn a_follower_that_lacked_an_existing_file_gets_server_0s_id() {
    let (m0, m1) = servers();
    let s = Stripe::new(vec![m0.clone(), m1.clone()], UNIT).unwrap();
    let root = Loc::root();
    // A create that reached server 0 only; then the same name, not exclusive.
    let a = m0.create(&root, &nf("f", 1, true), libc::O_RDWR).await.unwrap().attr;
    let b = s.create(&root, &nf("f", 2, false), libc::O_RDWR).await.unwrap().attr;
    assert_eq!(b.fid, a.fid);
    assert_eq!(names(&m1).await.get("f"), Some(&a.fid), "the follower's speculative copy was replaced");
    // An exclusive create that loses on server 0 leaves its follower part as
    // a stray; whoever next meets the name with server 0's answer replaces it.
    let c = m0.create(&root, &nf("g", 3, true), libc::O_RDWR).await.unwrap().attr;
    assert_eq!(s.create(&root, &nf("g", 4, true), libc::O_RDWR).await.unwrap_err(), FsError::EEXIST);
    assert_eq!(names(&m1).await.get("g"), Some(&FileId::from_random(4)));
    assert_eq!(s.lookup(&root, "g").await.unwrap().fid, c.fid);
    assert_eq!(names(&m0).await, names(&m1).await);
}

#[tokio::test]
async fn a_heal_leaves_a_new_untouched_follower_only_name_and_removes_it_later() {
    let (m0, m1) = servers();
    let root = Loc::root();
    // What a create under way looks like: the follower has it, server 0 not yet.
    m1.create(&root, &nf("new", 1, true), libc::O_RDWR).await.unwrap();
    // ...and what a missed removal of a written file looks like.
    let s = Stripe::new(vec![m0.clone(), m1.clone()], 4096).unwrap();
    let w = s.create(&root, &nf("written", 2, true), libc::O_RDWR).await.unwrap().attr;
    let wl = Loc { path: "written".into(), fid: Some(w.fid) };
    s.write(&wl, 0, Data::from(vec![1u8; 2 * 4096])).await.unwrap();
    s.release(&wl).await.unwrap();
    m0.unlink(&root, "written").await.unwrap();

    assert_eq!(s.lookup(&root, "new").await.unwrap_err(), FsError::ENOENT);
    assert_eq!(s.lookup(&root, "written").await.unwrap_err(), FsError::ENOENT);
    let left = names(&m1).await;
    assert!(left.contains_key("new"), "a create that may be under way is left");
    assert!(!left.contains_key("written"), "a written stray is no create under way: removed");
    // Server 0 gets the create: the servers agree, nothing was undone.
    m0.create(&root, &nf("new", 1, true), libc::O_RDWR).await.unwrap();
    assert_eq!(s.lookup(&root, "new").await.unwrap().fid, FileId::from_random(1));
    assert_eq!(names(&m0).await, names(&m1).await);

    // A follower-only name older than the grace is a stray: the walk waits
    // for it to be that old, then removes it.
    m1.mkdir(&root, &nf("late", 3, true)).await.unwrap();
    let s = Stripe::new(vec![m0.clone(), m1.clone()], UNIT).unwrap().with_heal_grace(Duration::from_millis(300));
    assert_eq!(s.lookup(&root, "late").await.unwrap_err(), FsError::ENOENT);
    assert!(names(&m1).await.contains_key("late"));
    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
    assert_eq!(names(&m0).await, names(&m1).await);
}

/// Two gateways (two stripes over the same servers) make the same names at
/// once, directories and files without O_EXCL: every name ends up made,
/// one object with one id on both servers, and a mkdir fails only with
/// EEXIST when the other's made the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_names_made_at_once_by_two_gateways_are_one_object_everywhere() {
    let (m0, m1) = servers();
    // every call waits a few scheduler turns first: the two gateways'
    // steps interleave as over a network
    let jittered = |m: &Next| -> Next { std::sync::Arc::new(Wrap::new(Jitter(std::sync::atomic::AtomicU64::new(1)), m.clone())) };
    let (j0, j1) = (jittered(&m0), jittered(&m1));
    let a = std::sync::Arc::new(Stripe::new(vec![j0.clone(), j1.clone()], UNIT).unwrap());
    let b = std::sync::Arc::new(Stripe::new(vec![j0, j1], UNIT).unwrap());
    let run = |s: std::sync::Arc<Stripe>, base: u128| async move {
        let root = Loc::root();
        let mut made = Vec::new();
        for i in 0..200u128 {
            let d = s.mkdir(&root, &nf(&format!("d{i}"), base + 2 * i, true)).await;
            assert!(matches!(d, Ok(_) | Err(FsError::EEXIST)), "mkdir d{i}: {d:?}");
            made.push(d.is_ok());
            let f = s.create(&root, &nf(&format!("f{i}"), base + 2 * i + 1, false), libc::O_RDWR).await;
            let f = f.unwrap_or_else(|e| panic!("create f{i}: {e:?}"));
            s.release(&Loc { path: format!("f{i}"), fid: Some(f.attr.fid) }).await.unwrap();
        }
        made
    };
    let (x, y) = tokio::join!(tokio::spawn(run(a, 1_000)), tokio::spawn(run(b, 100_000)));
    let (x, y) = (x.unwrap(), y.unwrap());
    for i in 0..200 {
        assert!(x[i] || y[i], "both mkdirs of d{i} failed");
    }
    let (n0, n1) = (names(&m0).await, names(&m1).await);
    assert_eq!(n0.len(), 400, "server 0: {n0:?}");
    assert_eq!(n1, n0, "the follower holds server 0's names and ids");
}

/// Waits 0–3 scheduler turns before each call (a cheap pseudo-random walk).
struct Jitter(std::sync::atomic::AtomicU64);

impl Around for Jitter {
    fn name(&self) -> &str {
        "jitter"
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        _fop: Fop,
        call: impl std::future::Future<Output = FsResult<T>> + Send + 'a,
    ) -> impl std::future::Future<Output = FsResult<T>> + Send + 'a {
        let x = self.0.fetch_add(0x9E37_79B9_7F4A_7C15, std::sync::atomic::Ordering::Relaxed);
        let turns = (x >> 61) & 3;
        async move {
            for _ in 0..turns {
                tokio::task::yield_now().await;
            }
            call.await
        }
    }
}
