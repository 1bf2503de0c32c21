//! A listing with attributes: the names from the storage server, entries
//! and stats from the bank; what the bank does not know is looked up, or
//! the batch listed by the server, and every answer is the disk's.

use crate::support::{Spec, Stack};
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use xlator::*;

/// `(name, id, kind, size)` of each entry, as the disk lists them.
async fn disk_listing(s: &Stack) -> Vec<(String, FileId, FileKind, u64)> {
    let mut v: Vec<_> = s.disk().readdir(&Loc::root(), 0, 1000, true).await.unwrap().into_iter().map(row).collect();
    v.sort_by(|x, y| x.0.cmp(&y.0));
    v
}

fn row(e: DirEntry) -> (String, FileId, FileKind, u64) {
    let a = e.attr.expect("a listing with attributes");
    assert_eq!((a.fid, a.kind), (e.fid, e.kind), "{}: the entry and its attributes agree", e.name);
    (e.name, e.fid, e.kind, a.size)
}

/// The whole listing through `gw`, batch by batch (`batch` entries each).
async fn listing(gw: &dyn Translator, batch: u32) -> Vec<(String, FileId, FileKind, u64)> {
    let (mut out, mut cookie) = (Vec::new(), 0);
    loop {
        let entries = gw.readdir(&Loc::root(), cookie, batch, true).await.unwrap();
        let Some(last) = entries.last() else { break };
        cookie = last.next;
        out.extend(entries.into_iter().map(row));
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    out
}

/// `[names, readdir, lookup, getattr]` calls that reached the disk.
fn calls(s: &Stack) -> [u64; 4] {
    [Fop::Names, Fop::Readdir, Fop::Lookup, Fop::Getattr].map(|op| s.calls(op))
}

fn since(s: &Stack, before: [u64; 4]) -> [u64; 4] {
    let now = calls(s);
    [0, 1, 2, 3].map(|i| now[i] - before[i])
}

#[tokio::test]
async fn a_directory_the_bank_knows_is_listed_from_its_names_alone() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    for i in 0..40 {
        s.file(&format!("f{i}"), b"").await;
    }
    s.gw().mkdir(&Loc::root(), &testkit::new_file("d")).await.unwrap();
    s.populated(0, 2 * 41).await;
    let want = disk_listing(&s).await;
    let before = calls(&s);
    // another gateway (no hints), in batches of 16
    assert_eq!(listing(&*s.gateways[1], 16).await, want);
    assert_eq!(since(&s, before), [4, 0, 0, 0], "one `names` per batch (3 full, 1 empty), nothing else");
}

#[tokio::test]
async fn names_the_bank_does_not_know_are_looked_up_a_few_at_a_time() {
    let s = Stack::start(Spec::default()).await;
    for i in 0..20 {
        s.file(&format!("f{i}"), b"").await;
    }
    s.populated(0, 2 * 20).await;
    // three made behind the bank's back
    for i in 0..3 {
        s.on_disk(&format!("g{i}"), b"abc").await;
    }
    let want = disk_listing(&s).await;
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 0, 3, 0], "the three unknown names looked up, each once");
    // and filled: their entries by those lookups, their stats by the next
    // listing's (a lookup without a hint claims the entry only)
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 0, 0, 3]);
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 0, 0, 0]);
}

#[tokio::test]
async fn a_batch_the_bank_mostly_misses_is_listed_by_the_server() {
    let s = Stack::start(Spec::default()).await;
    for i in 0..30 {
        s.on_disk(&format!("g{i}"), b"abc").await;
    }
    let want = disk_listing(&s).await;
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 1, 0, 0], "one listing by the server instead of 30 lookups");
    // which filled the entries (claimed before it); the ids they name were
    // not known then, so their stats are claimed and filled by the next
    // listing (the server's again); the one after is the bank's
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 1, 0, 0]);
    let before = calls(&s);
    assert_eq!(listing(s.gw(), 256).await, want);
    assert_eq!(since(&s, before), [2, 0, 0, 0]);
}

/// A write deletes a file's stat from the bank (a server cannot merge it);
/// a directory of files just written is listed by the server once and
/// filled, then listed from the bank.
#[tokio::test]
async fn stats_a_listing_lacked_are_filled_from_the_servers_listing() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    for i in 0..20 {
        s.file(&format!("f{i}"), b"").await;
    }
    s.populated(0, 2 * 20).await;
    for i in 0..20 {
        let f = s.gw().lookup(&Loc::root(), &format!("f{i}")).await.unwrap();
        s.gw().write(&testkit::at(&format!("f{i}"), f.fid), 0, Bytes::from(vec![b'w'; i])).await.unwrap();
    }
    let want = disk_listing(&s).await;
    let b = &*s.gateways[1];
    let before = calls(&s);
    assert_eq!(listing(b, 256).await, want);
    assert_eq!(since(&s, before), [2, 1, 0, 0], "20 stats lacking: the server's listing");
    let before = calls(&s);
    assert_eq!(listing(b, 256).await, want);
    assert_eq!(since(&s, before), [2, 0, 0, 0], "filled by it");
}

/// The server's listing is read, then a write lands (deleting the stat
/// claim), then the listing's old attributes come back: the fill fails,
/// and the next listing shows the write.
#[tokio::test]
async fn a_change_after_the_servers_listing_is_never_filled_over() {
    let bank = testkit::TestBank::start(2).await;
    let config = bank.config(4096);
    let hook: Arc<Mutex<Option<Arc<WriteAfterListing>>>> = Arc::default();
    let h = hook.clone();
    let s = Stack::over(bank, config, Spec::default(), move |sm| {
        let w = Arc::new(WriteAfterListing { below: sm, armed: Mutex::new(None) });
        *h.lock().unwrap() = Some(w.clone());
        w as Next
    });
    for i in 0..12 {
        s.on_disk(&format!("g{i}"), b"old").await;
    }
    // arm the wrapper under the gateway: g3 is written once its next listing is read
    let g3 = s.disk().lookup(&Loc::root(), "g3").await.unwrap();
    let w = hook.lock().unwrap().clone().unwrap();
    *w.armed.lock().unwrap() = Some(testkit::at("g3", g3.fid));
    let first = listing(s.gw(), 256).await;
    assert_eq!(first.iter().find(|r| r.0 == "g3").unwrap().3, 3, "the listing read before the write");
    assert!(w.armed.lock().unwrap().is_none(), "the write ran");
    let second = listing(s.gw(), 256).await;
    assert_eq!(second.iter().find(|r| r.0 == "g3").unwrap().3, 9, "the write is seen, not the old size filled");
    assert_eq!(second, disk_listing(&s).await);
}

struct WriteAfterListing {
    below: Next,
    /// the file written (through SMCache) once, right after the next listing
    armed: Mutex<Option<Loc>>,
}

#[async_trait::async_trait]
impl Translator for WriteAfterListing {
    fn name(&self) -> &str {
        "write-after-listing"
    }

    fn next(&self) -> Option<&Next> {
        Some(&self.below)
    }

    async fn readdir(&self, loc: &Loc, cookie: u64, max: u32, plus: bool) -> FsResult<Vec<DirEntry>> {
        let listed = self.below.readdir(loc, cookie, max, plus).await?;
        let armed = self.armed.lock().unwrap().take();
        if let Some(f) = armed {
            self.below.write(&f, 0, Bytes::from_static(b"new bytes")).await.unwrap();
        }
        Ok(listed)
    }
}

/// What another gateway changed shows in the next listing: the names are
/// the server's, and the bank's entries and stats were fixed before the
/// change was acknowledged.
#[tokio::test]
async fn a_listing_sees_every_acknowledged_change() {
    let s = Stack::start(Spec { gateways: 2, ..Spec::default() }).await;
    let (a, b) = (&s.gateways[0], &s.gateways[1]);
    let root = Loc::root();
    for i in 0..10 {
        s.file(&format!("f{i}"), b"0123").await;
    }
    s.populated(0, 2 * 10).await;
    assert_eq!(listing(&**b, 256).await, disk_listing(&s).await);
    // through gateway a: a write that grows one, a rename over another, an unlink, a new file
    let f1 = a.lookup(&root, "f1").await.unwrap();
    a.write(&testkit::at("f1", f1.fid), 4, Bytes::from_static(b"more bytes")).await.unwrap();
    a.rename(&root, "f2", &root, "f3", RenameFlags::default()).await.unwrap();
    a.unlink(&root, "f4").await.unwrap();
    a.create(&root, &testkit::new_file("new"), libc::O_RDWR | libc::O_CREAT).await.unwrap();
    let got = listing(&**b, 256).await;
    assert_eq!(got, disk_listing(&s).await);
    let names: Vec<&str> = got.iter().map(|r| r.0.as_str()).collect();
    assert!(names.contains(&"new") && !names.contains(&"f2") && !names.contains(&"f4"), "{names:?}");
    assert_eq!(got.iter().find(|r| r.0 == "f1").unwrap().3, 14, "the grown file's new size");
    assert_eq!(got.iter().find(|r| r.0 == "f3").unwrap().1, disk_fid(&s, "f3").await, "f3 is the renamed file");
}

async fn disk_fid(s: &Stack, name: &str) -> FileId {
    s.disk().lookup(&Loc::root(), name).await.unwrap().fid
}
