//! The memory leaf answers like posix: the same seeded random operations
//! (valid and invalid names, stale and wrong file ids, every rename flag,
//! hard links, unlinked open files, xattrs, paged listings) run against
//! `memory` and against `posix` over a temporary directory, and every
//! answer must match; every few operations the whole trees are compared.
//!
//! Times, `blocks` and directory sizes are file-system detail and are not
//! compared. Runs as root (posix stores special files' ids in `trusted.*`
//! and chowns new files only then); as another user it skips what differs.

mod call;
mod gen;

use gen::Gen;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::sync::Arc;
use xlator::*;

async fn differential(seed: u64, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let posix: Arc<dyn Translator> = posix::posix(dir.path(), 4096).unwrap();
    let mem: Arc<dyn Translator> = memory::memory();
    // the temporary directory starts as 0700; memory's root as 0755
    let root_perm = SetAttr { perm: Some(0o755), ..Default::default() };
    posix.setattr(&Loc::root(), &root_perm).await.unwrap();
    let mut g = Gen::new(StdRng::seed_from_u64(seed), unsafe { libc::geteuid() } == 0);
    let (mut log, mut seen) = (Vec::new(), std::collections::BTreeSet::new());
    for i in 0..n {
        let call = g.call(&posix).await;
        log.push(format!("{i}: {call:?}"));
        seen.insert(call.fop().name());
        let want = call.run(&posix).await;
        let got = call.run(&mem).await;
        if want != got {
            let tail = log[log.len().saturating_sub(30)..].join("\n");
            panic!("seed {seed:#x} op {i}: {call:?}\nposix:  {want}\nmemory: {got}\nlast ops:\n{tail}");
        }
        if i % 10 == 9 {
            let (want, got) = (tree(&posix).await, tree(&mem).await);
            assert_eq!(want, got, "seed {seed:#x}: trees differ after op {i}");
        }
    }
    // Locks are not the leaves' business: protocol-server answers them from
    // its lock table (both leaves refuse them alike).
    for op in Fop::ALL.iter().filter(|op| !matches!(op, Fop::Getlk | Fop::Setlk)) {
        assert!(seen.contains(op.name()), "seed {seed:#x}: no {} was generated", op.name());
    }
}

/// Every object reachable from the root: path, attributes, content.
async fn tree(x: &Arc<dyn Translator>) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![Loc::root()];
    while let Some(dir) = todo.pop() {
        let mut entries = call::list(x, &dir, 7, true).await.expect("list a directory of the tree");
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for e in entries {
            let loc = Loc::new(dir.child(&e.name).path, Some(e.fid));
            let a = e.attr.clone().expect("readdirplus fills attr");
            let content = match a.kind {
                FileKind::File => format!("{:?}", x.read(&loc, 0, 1 << 20).await),
                FileKind::Symlink => format!("{:?}", x.readlink(&loc).await),
                FileKind::Dir => {
                    todo.push(loc.clone());
                    String::new()
                }
                _ => String::new(),
            };
            let xattrs = x.listxattr(&loc).await.map(|mut v| {
                v.sort();
                v
            });
            out.push(format!("{} {} {content} {xattrs:?}", loc.path, call::attr(&a)));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_answers_like_posix_seed_1() {
    differential(0x3e30_0001, 600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_answers_like_posix_seed_2() {
    differential(0x3e30_0002, 600).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_answers_like_posix_seed_3() {
    differential(0x3e30_0003, 600).await;
}
