//! The coherence translator in a graph over a real leaf (the in-memory
//! tree): what a change through it, and a callback travelling up to it,
//! do to what it remembers.

use coherence::{Coherence, Mode};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlator::*;

fn new_file(name: &str, fid: u128) -> NewFile {
    NewFile { name: name.into(), fid: FileId::from_random(fid), perm: 0o644, owner: Owner::default(), exclusive: true }
}

/// A coherence translator over a memory leaf, with a lease from its one server.
async fn graph() -> (Arc<Coherence>, Next) {
    let co = Arc::new(Coherence::new(memory::memory(), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let lease = Upcall { server: 0, lease_until: Some(Instant::now() + Duration::from_secs(60)), ..Upcall::default() };
    top.upcall(&lease).await;
    (co, top)
}

#[tokio::test]
async fn a_callback_that_travels_up_drops_what_it_names() {
    let (co, top) = graph().await;
    let f = top.create(&Loc::root(), &new_file("f", 7), libc::O_RDWR).await.unwrap().attr;
    let ino = f.fid.ino();
    assert_eq!(co.kernel().memo_attr(ino).map(|(a, _)| a), Some(f.clone()), "a create here is remembered");
    let callback = Upcall { server: 0, items: vec![Invalidation::attrs(f.fid)], seq: 1, ..Upcall::default() };
    top.upcall(&callback).await;
    assert!(co.kernel().memo_attr(ino).is_none(), "called back: its attributes go");
}

#[tokio::test]
async fn a_change_here_leaves_its_answer_and_a_rename_leaves_what_it_moved_as_after_it() {
    let (co, top) = graph().await;
    let f = top.create(&Loc::root(), &new_file("f", 8), libc::O_RDWR).await.unwrap().attr;
    let (loc, ino) = (Loc::new("f", Some(f.fid)), f.fid.ino());
    let set = SetAttr { size: Some(5), ..SetAttr::default() };
    let after = top.setattr(&loc, &set).await.unwrap();
    assert_eq!(after.size, 5);
    assert_eq!(co.kernel().memo_attr(ino).map(|(a, _)| a.size), Some(5), "the setattr's answer replaced what was remembered");
    let r = top.rename(&Loc::root(), "f", &Loc::root(), "g", RenameFlags::default()).await.unwrap();
    let moved = r.moved_attr.expect("the leaf gives what moved as it is after the rename");
    assert_eq!(co.kernel().memo_attr(ino).map(|(a, _)| a), Some(moved), "what moved, as the answer gave it");
}

/// Getattrs that reached the leaf.
fn getattrs(m: &memory::Memory) -> u64 {
    m.calls(Fop::Getattr) + m.calls(Fop::Getattrs)
}

#[tokio::test]
async fn a_changes_answer_leaves_the_directorys_attributes_after_it_known_without_asking() {
    let leaf = memory::memory();
    let co = Arc::new(Coherence::new(leaf.clone(), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let lease = Upcall { server: 0, lease_until: Some(Instant::now() + Duration::from_secs(60)), ..Upcall::default() };
    top.upcall(&lease).await;
    let d = top.mkdir(&Loc::root(), &NewFile { perm: 0o755, ..new_file("d", 20) }).await.unwrap().attr;
    let (dl, ino) = (Loc::new("d", Some(d.fid)), d.fid.ino());
    let asked = getattrs(&leaf);
    let check = |what: &str, before: u64| {
        let (a, _) = co.kernel().memo_attr(ino).unwrap_or_else(|| panic!("{what}: the directory's attributes are not known"));
        assert_eq!(getattrs(&leaf), before, "{what}: a getattr reached the leaf");
        a
    };
    top.create(&dl, &new_file("f", 21), libc::O_RDWR).await.unwrap();
    let after = check("create", asked);
    assert_eq!(after, leaf.getattr(&dl).await.unwrap(), "create: the attributes after it");
    let asked = getattrs(&leaf);
    top.mkdir(&dl, &NewFile { perm: 0o755, ..new_file("sub", 22) }).await.unwrap();
    assert_eq!(check("mkdir", asked).nlink, 3);
    let asked = getattrs(&leaf);
    top.rename(&dl, "f", &dl, "g", RenameFlags::default()).await.unwrap();
    check("rename", asked);
    top.unlink(&dl, "g").await.unwrap();
    check("unlink", asked);
    top.rmdir(&dl, "sub").await.unwrap();
    assert_eq!(check("rmdir", asked), leaf.getattr(&dl).await.unwrap(), "rmdir: the attributes after it");
    // a rename between two directories: both
    let e = top.mkdir(&Loc::root(), &NewFile { perm: 0o755, ..new_file("e", 23) }).await.unwrap().attr;
    let el = Loc::new("e", Some(e.fid));
    top.create(&dl, &new_file("x", 24), libc::O_RDWR).await.unwrap();
    let asked = getattrs(&leaf);
    top.rename(&dl, "x", &el, "y", RenameFlags::default()).await.unwrap();
    check("rename between directories (source)", asked);
    let (there, _) = co.kernel().memo_attr(e.fid.ino()).expect("rename between directories: the target's attributes");
    assert_eq!(there, leaf.getattr(&el).await.unwrap());
}

/// A leaf whose creates answer without the directory's attributes after
/// (as stripe's do when a server did not give its copy).
struct NoDirAfter(Next);

#[async_trait::async_trait]
impl Translator for NoDirAfter {
    fn name(&self) -> &str {
        "no-dir-after"
    }
    fn next(&self) -> Option<&Next> {
        Some(&self.0)
    }
    async fn create(&self, parent: &Loc, new: &NewFile, flags: i32) -> FsResult<Made> {
        Ok(Made { dir: None, ..self.0.create(parent, new, flags).await? })
    }
}

#[tokio::test]
async fn without_the_directorys_attributes_in_the_answer_they_are_fetched_ahead() {
    let leaf = memory::memory();
    let co = Arc::new(Coherence::new(Arc::new(NoDirAfter(leaf.clone())), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let lease = Upcall { server: 0, lease_until: Some(Instant::now() + Duration::from_secs(60)), ..Upcall::default() };
    top.upcall(&lease).await;
    // (a directory made here: held, so the memo may answer for it)
    let d = top.mkdir(&Loc::root(), &NewFile { perm: 0o755, ..new_file("d", 31) }).await.unwrap().attr;
    let dl = Loc::new("d", Some(d.fid));
    let asked = getattrs(&leaf);
    top.create(&dl, &new_file("f", 30), libc::O_RDWR).await.unwrap();
    // (the kernel's GETATTR waits for the fetch under way)
    let after = top.getattr(&dl).await.unwrap();
    assert_eq!(getattrs(&leaf), asked + 1, "fetched once, ahead");
    assert_eq!(co.kernel().memo_attr(d.fid.ino()).map(|(a, _)| a), Some(after));
}

#[tokio::test]
async fn a_lease_not_renewed_serves_nothing() {
    let co = Arc::new(Coherence::new(memory::memory(), Mode::On, Vec::new()));
    let top: Next = Arc::new(InGraph::new(co.clone()));
    let f = top.create(&Loc::root(), &new_file("f", 9), libc::O_RDWR).await.unwrap().attr;
    assert!(co.kernel().memo_attr(f.fid.ino()).is_none(), "no lease: the memo does not answer");
    assert_eq!(co.kernel().ttl(co.kernel().ticket(), &[f.fid.ino()]), Duration::ZERO);
}
