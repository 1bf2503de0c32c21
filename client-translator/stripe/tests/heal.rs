//! A follower that missed a namespace step (simulated by applying the step
//! to server 0 alone, as a crash between servers leaves it) is made to
//! agree with server 0 by a lookup or the heal walk, and keeps its stripe
//! units of files server 0 still has.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use stripe::Stripe;
use xlator::*;

const UNIT: u64 = stripe::DEFAULT_STRIPE_UNIT;

fn nf(name: &str, id: u128) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(id), perm: 0o644, owner: Owner::default(), exclusive: true }
}

fn two() -> (Next, Next, Stripe) {
    let (m0, m1): (Next, Next) = (memory::memory(), memory::memory());
    // (strays made by hand below are not creates under way)
    let s = Stripe::new(vec![m0.clone(), m1.clone()], UNIT).unwrap().with_heal_grace(std::time::Duration::ZERO);
    (m0, m1, s)
}

/// Every path under `dir` on one server: its kind and id.
async fn tree(s: &Next, dir: Loc, out: &mut BTreeMap<String, (FileKind, FileId)>) {
    let mut cookie = 0;
    loop {
        let page = s.readdir(&dir, cookie, 256, false).await.unwrap();
        let Some(last) = page.last() else { break };
        cookie = last.next;
        for e in page {
            let at = Loc { path: dir.child(&e.name).path, fid: Some(e.fid) };
            out.insert(at.path.clone(), (e.kind, e.fid));
            if e.kind == FileKind::Dir {
                Box::pin(tree(s, at, out)).await;
            }
        }
    }
}

async fn assert_agree(m0: &Next, m1: &Next) {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    tree(m0, Loc::root(), &mut a).await;
    tree(m1, Loc::root(), &mut b).await;
    assert_eq!(a, b, "server 0 and the follower hold the same names, kinds and ids");
}

/// Two stripe units: the follower holds the second.
fn data() -> Data {
    Data::from((0..2 * UNIT as usize).map(|i| (i % 251) as u8).collect::<Vec<_>>())
}

async fn file_with_data(s: &Stripe, dir: &Loc, name: &str, id: u128) -> Attr {
    let a = s.create(dir, &nf(name, id), libc::O_RDWR).await.unwrap().attr;
    let at = Loc { path: dir.child(name).path, fid: Some(a.fid) };
    s.write(&at, 0, data()).await.unwrap();
    s.release(&at).await.unwrap();
    a
}

#[tokio::test]
async fn a_lookup_repairs_the_name_it_meets() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    // A create that reached server 0 only: the follower gets it, same id.
    let d = m0.mkdir(&root, &nf("d", 1)).await.unwrap().attr;
    let f = m0.create(&root, &nf("f", 2), libc::O_RDWR).await.unwrap().attr;
    // An unlink that reached server 0 only.
    s.create(&root, &nf("gone", 3), libc::O_RDWR).await.unwrap();
    m0.unlink(&root, "gone").await.unwrap();
    // The follower holds a name with another id.
    s.mkdir(&root, &nf("w", 4)).await.unwrap();
    m1.rmdir(&root, "w").await.unwrap();
    m1.create(&root, &nf("w", 5), libc::O_RDWR).await.unwrap();

    assert_eq!(s.lookup(&root, "d").await.unwrap().fid, d.fid);
    assert_eq!(s.lookup(&root, "f").await.unwrap().fid, f.fid);
    assert_eq!(s.lookup(&root, "gone").await.unwrap_err(), FsError::ENOENT);
    assert_eq!(s.lookup(&root, "w").await.unwrap().kind, FileKind::Dir);
    assert_agree(&m0, &m1).await;
    // ...and a later create of the removed name works on both.
    s.create(&root, &nf("gone", 6), libc::O_RDWR).await.unwrap();
    assert_agree(&m0, &m1).await;
}

#[tokio::test]
async fn a_missed_rename_keeps_the_followers_units() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let a = file_with_data(&s, &root, "old", 10).await;
    m0.rename(&root, "old", &root, "new", RenameFlags::default()).await.unwrap();
    // The follower's only name is stale: it is not removed before the id
    // has its new name there.
    assert_eq!(s.lookup(&root, "old").await.unwrap_err(), FsError::ENOENT);
    assert!(m1.lookup(&root, "old").await.is_ok(), "the follower's only name of a live file stays");
    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
    assert_agree(&m0, &m1).await;
    let at = Loc { path: "new".into(), fid: Some(a.fid) };
    assert_eq!(s.read(&at, 0, 2 * UNIT as u32).await.unwrap(), data(), "both units survive the repair");
}

#[tokio::test]
async fn the_walk_repairs_a_missed_directory_move_and_removals() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let a = s.mkdir(&root, &nf("a", 20)).await.unwrap().attr;
    let al = Loc { path: "a".into(), fid: Some(a.fid) };
    let x = file_with_data(&s, &al, "x", 21).await;
    s.mkdir(&al, &nf("sub", 22)).await.unwrap();
    // Half-done: a directory move, a subtree removal, a file removal.
    m0.rename(&root, "a", &root, "b", RenameFlags::default()).await.unwrap();
    let t = s.mkdir(&root, &nf("t", 23)).await.unwrap().attr;
    let tl = Loc { path: "t".into(), fid: Some(t.fid) };
    s.create(&tl, &nf("y", 24), libc::O_RDWR).await.unwrap();
    m0.unlink(&tl, "y").await.unwrap();
    m0.rmdir(&root, "t").await.unwrap();

    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
    assert_agree(&m0, &m1).await;
    let at = Loc { path: "b/x".into(), fid: Some(x.fid) };
    assert_eq!(s.read(&at, 0, 2 * UNIT as u32).await.unwrap(), data());
    // A second walk finds nothing to do.
    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
}

#[tokio::test]
async fn the_step_a_heal_already_did_is_not_an_error() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    // A heal made the directory on the follower before this gateway's
    // follower step arrived: the mkdir still succeeds.
    let new = nf("d", 30);
    m1.mkdir(&root, &new).await.unwrap();
    s.mkdir(&root, &new).await.unwrap();
    // ...and a removal whose follower step finds the name gone.
    m1.rmdir(&root, "d").await.unwrap();
    s.rmdir(&root, "d").await.unwrap();
    assert_agree(&m0, &m1).await;
}

#[tokio::test]
async fn a_stray_in_the_way_of_a_create_is_removed_first() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    // An rmdir and an unlink that reached server 0 only.
    s.mkdir(&root, &nf("sd", 40)).await.unwrap();
    m0.rmdir(&root, "sd").await.unwrap();
    s.symlink(&root, &nf("sl", 41), "target").await.unwrap();
    m0.unlink(&root, "sl").await.unwrap();
    // New objects under those names, with new ids, made without a lookup first.
    s.mkdir(&root, &nf("sd", 42)).await.unwrap();
    s.symlink(&root, &nf("sl", 43), "other").await.unwrap();
    assert_agree(&m0, &m1).await;
    let sl = Loc { path: "sl".into(), fid: Some(FileId::from_random(43)) };
    assert_eq!(m1.readlink(&sl).await.unwrap(), "other");
}

fn chmod(perm: u32) -> SetAttr {
    SetAttr { perm: Some(perm), ..SetAttr::default() }
}

fn chown(uid: u32, gid: u32) -> SetAttr {
    SetAttr { uid: Some(uid), gid: Some(gid), ..SetAttr::default() }
}

/// Mode and owner of `name` in the root on one server.
async fn mode_owner(s: &Next, name: &str) -> (u32, u32, u32) {
    let a = s.lookup(&Loc::root(), name).await.unwrap();
    (a.perm, a.uid, a.gid)
}

/// A chmod or chown that reached server 0 only (the follower crashed
/// between servers): a lookup gives the follower server 0's mode and
/// owner, for a file, a directory and a symlink (owner only: a symlink's
/// mode cannot change).
#[tokio::test]
async fn a_lookup_repairs_a_missed_chmod_and_chown() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let f = file_with_data(&s, &root, "f", 50).await;
    let d = s.mkdir(&root, &nf("d", 51)).await.unwrap().attr;
    let l = s.symlink(&root, &nf("l", 52), "f").await.unwrap().attr;
    let at = |name: &str, a: &Attr| Loc { path: name.into(), fid: Some(a.fid) };
    m0.setattr(&at("f", &f), &chmod(0o600)).await.unwrap();
    m0.setattr(&at("d", &d), &chown(1000, 100)).await.unwrap();
    m0.setattr(&at("d", &d), &chmod(0o1777)).await.unwrap();
    m0.setattr(&at("l", &l), &chown(1001, 101)).await.unwrap();
    assert_ne!(mode_owner(&m1, "f").await, mode_owner(&m0, "f").await);

    for name in ["f", "d", "l"] {
        let seen = s.lookup(&root, name).await.unwrap();
        assert_eq!((seen.perm, seen.uid, seen.gid), mode_owner(&m0, name).await, "{name}: users see server 0's");
        assert_eq!(mode_owner(&m1, name).await, mode_owner(&m0, name).await, "{name}: the follower was repaired");
    }
    assert_eq!(mode_owner(&m1, "d").await, (0o1777, 1000, 100));
    let here = Loc { path: "f".into(), fid: Some(f.fid) };
    assert_eq!(s.read(&here, 0, 2 * UNIT as u32).await.unwrap(), data(), "the follower's units are untouched");
}

/// The walk repairs what no lookup met, deep in the tree: a directory's
/// mode, and a file copy that missed both a chown and a chmod.
#[tokio::test]
async fn the_walk_repairs_missed_setattrs_below() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let a = s.mkdir(&root, &nf("a", 60)).await.unwrap().attr;
    let al = Loc { path: "a".into(), fid: Some(a.fid) };
    let x = s.create(&al, &nf("x", 61), libc::O_RDWR).await.unwrap().attr;
    let xl = Loc { path: "a/x".into(), fid: Some(x.fid) };
    s.release(&xl).await.unwrap();
    m0.setattr(&xl, &chown(7, 8)).await.unwrap();
    m0.setattr(&al, &chmod(0o700)).await.unwrap();
    // The follower's copy: same owner, other mode (a chmod it missed
    // after a chown it saw).
    s.setattr(&xl, &chmod(0o755)).await.unwrap();
    m1.setattr(&xl, &chmod(0o711)).await.unwrap();

    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
    let on = |m: &Next, loc: &Loc| {
        let (m, loc) = (m.clone(), loc.clone());
        async move {
            let a = m.getattr(&loc).await.unwrap();
            (a.perm, a.uid, a.gid)
        }
    };
    assert_eq!(on(&m1, &xl).await, (0o755, 7, 8));
    assert_eq!(on(&m1, &al).await, on(&m0, &al).await);
    assert_eq!(on(&m1, &al).await.0, 0o700);
}

/// Times are not repaired: a follower's newer mtime is a write that
/// reached only its units, which a missed `touch -d` to an older date
/// cannot be told from. The volume shows the latest.
#[tokio::test]
async fn times_are_left_as_they_are() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let f = file_with_data(&s, &root, "f", 70).await;
    let at = Loc { path: "f".into(), fid: Some(f.fid) };
    let old = Timestamp { secs: 1_000_000, nsecs: 0 };
    m0.setattr(&at, &SetAttr { mtime: Some(TimeSet::At(old)), ..SetAttr::default() }).await.unwrap();
    let before = m1.getattr(&at).await.unwrap().mtime;
    assert!(before > old);
    assert_eq!(s.lookup(&root, "f").await.unwrap().mtime, before, "the latest copy's time");
    s.setxattr(&root, stripe::HEAL_XATTR, b"1", XattrFlags::default()).await.unwrap();
    assert_eq!(m1.getattr(&at).await.unwrap().mtime, before, "the follower's time stays");
    assert_eq!(m0.getattr(&at).await.unwrap().mtime, old);
}

/// A heal racing a chmod that reached the follower before server 0 (both
/// are asked at once) writes server 0's old mode back there; once server 0
/// has the new one, the next lookup gives it to the follower. Users saw
/// server 0's mode throughout.
#[tokio::test]
async fn a_chmod_the_follower_got_first_is_reverted_then_repaired() {
    let (m0, m1, s) = two();
    let root = Loc::root();
    let f = file_with_data(&s, &root, "f", 80).await;
    let at = Loc { path: "f".into(), fid: Some(f.fid) };
    m1.setattr(&at, &chmod(0o600)).await.unwrap();
    assert_eq!(s.lookup(&root, "f").await.unwrap().perm, 0o644);
    assert_eq!(mode_owner(&m1, "f").await.0, 0o644, "server 0's mode wins while it has the old one");
    m0.setattr(&at, &chmod(0o600)).await.unwrap();
    assert_eq!(s.lookup(&root, "f").await.unwrap().perm, 0o600);
    assert_eq!(mode_owner(&m1, "f").await.0, 0o600);
}

/// A follower on which a rename that server 0 already applied lands just
/// before the heal's first change of `name` there: the race between a
/// lookup's heal and another gateway's rename that is between servers.
struct RenameLandsFirst {
    next: Next,
    /// the pending follower step: rename `.0` over `.1`, once
    pending: std::sync::Mutex<Option<(String, String)>>,
}

impl RenameLandsFirst {
    async fn land(&self, name: &str) {
        let step = self.pending.lock().unwrap().take_if(|(_, to)| to == name);
        if let Some((from, to)) = step {
            self.next.rename(&Loc::root(), &from, &Loc::root(), &to, RenameFlags::default()).await.unwrap();
        }
    }
}

#[async_trait::async_trait]
impl Translator for RenameLandsFirst {
    fn name(&self) -> &str {
        "rename-lands-first"
    }
    fn next(&self) -> Option<&Next> {
        Some(&self.next)
    }
    async fn unlink(&self, parent: &Loc, name: &str) -> FsResult<Removed> {
        self.land(name).await;
        self.next.unlink(parent, name).await
    }
    async fn rename(&self, p: &Loc, name: &str, np: &Loc, nn: &str, flags: RenameFlags) -> FsResult<Renamed> {
        self.land(name).await;
        self.next.rename(p, name, np, nn, flags).await
    }
}

#[tokio::test]
async fn a_heal_racing_a_rename_between_servers_keeps_the_renamed_file() {
    let (m0, m1): (Next, Next) = (memory::memory(), memory::memory());
    let racing = std::sync::Arc::new(RenameLandsFirst { next: m1.clone(), pending: Default::default() });
    let s = Stripe::new(vec![m0.clone(), racing.clone()], UNIT).unwrap().with_heal_grace(std::time::Duration::ZERO);
    let root = Loc::root();
    file_with_data(&s, &root, "f", 40).await;
    let new = file_with_data(&s, &root, "tmp", 41).await;
    // Another gateway's `rename tmp f` reached server 0; its follower step
    // arrives while this gateway's lookup heals `f` there.
    m0.rename(&root, "tmp", &root, "f", RenameFlags::default()).await.unwrap();
    *racing.pending.lock().unwrap() = Some(("tmp".into(), "f".into()));
    assert_eq!(s.lookup(&root, "f").await.unwrap().fid, new.fid);
    assert!(racing.pending.lock().unwrap().is_none(), "the rename landed during the heal");
    let at = Loc { path: "f".into(), fid: Some(new.fid) };
    assert_eq!(s.read(&at, 0, 2 * UNIT as u32).await.unwrap(), data(), "the follower's unit of the renamed file survives the heal");
    assert_agree(&m0, &m1).await;
}

/// A server that can be taken away: every call fails with EIO while down,
/// as the protocol client answers for an unreachable server.
struct Away(Arc<AtomicBool>);

impl Around for Away {
    fn name(&self) -> &str {
        "away"
    }

    fn around<'a, T: Send + 'a>(
        &'a self,
        _fop: Fop,
        call: impl std::future::Future<Output = FsResult<T>> + Send + 'a,
    ) -> impl std::future::Future<Output = FsResult<T>> + Send + 'a {
        let away = self.0.load(SeqCst);
        async move {
            if away {
                Err(FsError::EIO)
            } else {
                call.await
            }
        }
    }
}

/// Server 0 and a follower that can be taken away, under a stripe whose
/// background heal runs (until the sender is dropped).
fn with_healer() -> (Next, Next, Arc<AtomicBool>, Arc<Stripe>, tokio::sync::oneshot::Sender<()>) {
    let (m0, m1): (Next, Next) = (memory::memory(), memory::memory());
    let away = Arc::new(AtomicBool::new(false));
    let f1: Next = Arc::new(Wrap::new(Away(away.clone()), m1.clone()));
    let s = Arc::new(Stripe::new(vec![m0.clone(), f1], UNIT).unwrap().with_heal_grace(Duration::ZERO));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(s.clone().run_healer(async move {
        let _ = stopped.await;
    }));
    (m0, m1, away, s, stop)
}

/// Wait (bounded) until nothing waits for the background heal.
async fn healed(s: &Stripe) {
    let wait = async {
        while s.pending_heals() > 0 || s.heal_sweep_owed() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("the background heal empties its index");
}

#[tokio::test]
async fn what_a_follower_missed_while_away_is_healed_in_the_background() {
    let (m0, m1, away, s, _stop) = with_healer();
    let root = Loc::root();
    file_with_data(&s, &root, "f", 1).await;
    file_with_data(&s, &root, "a", 2).await;
    s.mkdir(&root, &nf("d", 3)).await.unwrap();
    let c = s.create(&root, &nf("c", 4), libc::O_RDWR).await.unwrap().attr;
    s.release(&Loc { path: "c".into(), fid: Some(c.fid) }).await.unwrap();

    away.store(true, SeqCst);
    assert_eq!(s.unlink(&root, "f").await.unwrap_err(), FsError::EIO);
    assert_eq!(s.rmdir(&root, "d").await.unwrap_err(), FsError::EIO);
    assert_eq!(s.rename(&root, "a", &root, "b", RenameFlags::default()).await.unwrap_err(), FsError::EIO);
    assert_eq!(s.setattr(&Loc { path: "c".into(), fid: Some(c.fid) }, &chmod(0o600)).await.unwrap_err(), FsError::EIO);
    assert_eq!(s.pending_heals(), 5, "f, d, a, b and c are recorded");
    // While the follower is away nothing is healed, and nothing is lost.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.pending_heals(), 5);

    away.store(false, SeqCst);
    healed(&s).await;
    assert_agree(&m0, &m1).await;
    assert_eq!(mode_owner(&m1, "c").await, mode_owner(&m0, "c").await, "the missed chmod reached the follower");
    assert_eq!(s.read(&Loc { path: "b".into(), fid: None }, 0, 2 * UNIT as u32).await.unwrap(), data(), "the renamed file kept its units");
}

#[tokio::test]
async fn an_overflowing_index_falls_back_to_a_sweep() {
    let (m0, m1, away, s, _stop) = with_healer();
    let root = Loc::root();
    // A step the follower missed that nobody recorded (made by hand).
    s.create(&root, &nf("x", 1), libc::O_RDWR).await.unwrap();
    m0.unlink(&root, "x").await.unwrap();
    away.store(true, SeqCst);
    for i in 0..=stripe::MAX_PENDING {
        let _ = s.setattr(&Loc { path: format!("n{i}"), fid: None }, &chmod(0o600)).await;
    }
    assert_eq!(s.pending_heals(), stripe::MAX_PENDING, "the index is bounded");
    assert!(s.heal_sweep_owed(), "past the bound, a sweep is owed");
    away.store(false, SeqCst);
    healed(&s).await;
    assert_agree(&m0, &m1).await;
}

/// A counter of `registry`, by name.
fn counter(registry: &prometheus::Registry, name: &str) -> Option<f64> {
    let families = registry.gather();
    let f = families.iter().find(|f| f.name() == name)?;
    Some(f.get_metric().iter().map(|m| m.get_counter().get_value()).sum())
}

#[tokio::test]
async fn a_write_that_failed_on_a_server_is_counted_and_a_whole_one_is_not() {
    let (_m0, _m1, away, s, _stop) = with_healer();
    let registry = prometheus::Registry::new();
    s.register_metrics(&registry);
    let root = Loc::root();
    let a = file_with_data(&s, &root, "f", 1).await;
    let at = Loc { path: "f".into(), fid: Some(a.fid) };
    s.write(&at, 0, data()).await.unwrap();
    assert_eq!(counter(&registry, "imca_gateway_writes_failed_partway_total"), Some(0.0));
    away.store(true, SeqCst);
    // unit 0 (server 0) lands, unit 1 (the follower's) fails: a short count
    assert_eq!(s.write(&at, 0, data()).await.unwrap().written, UNIT as u32);
    // the follower's unit first: EIO, and server 0's next unit landed
    assert_eq!(s.write(&at, UNIT, data()).await.unwrap_err(), FsError::EIO);
    assert_eq!(counter(&registry, "imca_gateway_writes_failed_partway_total"), Some(2.0));
}

/// A server whose answers are lost while set: it does what it is asked,
/// and the caller is told EIO (a timeout after the server acted).
struct Lost(Arc<AtomicBool>);

impl Around for Lost {
    fn name(&self) -> &str {
        "lost"
    }

    async fn around<'a, T: Send + 'a>(
        &'a self,
        _fop: Fop,
        call: impl std::future::Future<Output = FsResult<T>> + Send + 'a,
    ) -> FsResult<T> {
        let r = call.await;
        if self.0.load(SeqCst) {
            Err(FsError::EIO)
        } else {
            r
        }
    }
}

#[tokio::test]
async fn a_removal_server_zero_did_without_answering_is_healed_on_the_follower() {
    let (m0, m1): (Next, Next) = (memory::memory(), memory::memory());
    let lost = Arc::new(AtomicBool::new(false));
    let s0: Next = Arc::new(Wrap::new(Lost(lost.clone()), m0.clone()));
    let s = Arc::new(Stripe::new(vec![s0, m1.clone()], UNIT).unwrap().with_heal_grace(Duration::ZERO));
    let (_stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(s.clone().run_healer(async move {
        let _ = stopped.await;
    }));
    let root = Loc::root();
    file_with_data(&s, &root, "f", 1).await;
    file_with_data(&s, &root, "a", 2).await;
    lost.store(true, SeqCst);
    // Server 0 did them; the followers were never asked.
    assert_eq!(s.unlink(&root, "f").await.unwrap_err(), FsError::EIO);
    assert_eq!(s.rename(&root, "a", &root, "b", RenameFlags::default()).await.unwrap_err(), FsError::EIO);
    assert_eq!(s.pending_heals(), 3, "f, a and b are recorded");
    assert!(m1.lookup(&root, "f").await.is_ok(), "the follower still has the name");
    lost.store(false, SeqCst);
    healed(&s).await;
    assert_agree(&m0, &m1).await;
    assert_eq!(s.read(&Loc { path: "b".into(), fid: None }, 0, 2 * UNIT as u32).await.unwrap(), data());
}
