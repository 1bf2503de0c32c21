//! What finding directories costs on one storage server's leaf (no RPC):
//! mkdir, then getattr of every directory by (path, id) on a server whose
//! directory table is warm, and on a fresh server (cold: records are
//! walked, or — before records — paths opened).
//!
//!     cargo run -p posix --example dir_ids [EXPORT_PARENT]
//!
//! Prints one line per phase: operations per second.

use std::time::Instant;
use testkit::{at, nf, root};
use xlator::*;

const PARENTS: usize = 20;
const PER_PARENT: usize = 100;
const ROUNDS: usize = 5;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let base = std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).unwrap();
    let x = posix::posix(dir.path(), 4096).unwrap();
    let mut dirs = Vec::new();
    let t = Instant::now();
    for p in 0..PARENTS {
        let parent = nf(&format!("p{p}"));
        x.mkdir(&root(), &parent).await.unwrap();
        let ploc = at(&format!("p{p}"), parent.fid);
        for c in 0..PER_PARENT {
            let d = nf(&format!("d{c}"));
            x.mkdir(&ploc, &d).await.unwrap();
            dirs.push(at(&format!("p{p}/d{c}"), d.fid));
        }
    }
    report("mkdir", dirs.len() + PARENTS, t);

    // Warm: the gateway looked every directory up (as it does before using one).
    for l in &dirs {
        let (parent, name) = l.path.rsplit_once('/').unwrap();
        x.lookup(&Loc::new(parent, None), name).await.unwrap();
    }
    let t = Instant::now();
    for _ in 0..ROUNDS {
        for l in &dirs {
            x.getattr(l).await.unwrap();
        }
    }
    report("getattr dir, warm", dirs.len() * ROUNDS, t);

    let t = Instant::now();
    for _ in 0..ROUNDS {
        let fresh = posix::posix(dir.path(), 4096).unwrap();
        for l in &dirs {
            fresh.getattr(l).await.unwrap();
        }
    }
    report("getattr dir, fresh server", dirs.len() * ROUNDS, t);
}

fn report(what: &str, n: usize, t: Instant) {
    let s = t.elapsed().as_secs_f64();
    println!("{what:28} {n:6} ops  {:9.0} ops/s", n as f64 / s);
}
