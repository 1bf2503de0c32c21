//! A directory of 100,000 entries listed through cookies, created through
//! the RPC (so every entry has its id and per-fid link, as in real use).

mod common;
use common::*;
use std::time::Instant;
use xlator::Translator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_entries() {
    let e = env().await;
    let c = std::sync::Arc::new(e.c);
    c.mkdir(&root(), &nf("big")).await.unwrap();
    let n = 100_000usize;
    let t = Instant::now();
    // Created through the RPC, 64 in flight.
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (c, sem) = (c.clone(), sem.clone());
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire().await.unwrap();
            c.create(&path("big"), &nf(&format!("entry-{i:06}")), 0).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    eprintln!("created {n} files in {:?}", t.elapsed());
    for plus in [false, true] {
        let t = Instant::now();
        let mut seen = vec![false; n];
        let mut cookie = 0;
        let mut calls = 0;
        loop {
            let batch = c.readdir(&path("big"), cookie, 512, plus).await.unwrap();
            calls += 1;
            let Some(last) = batch.last() else { break };
            cookie = last.next;
            for ent in &batch {
                let i: usize = ent.name.strip_prefix("entry-").unwrap().parse().unwrap();
                assert!(!seen[i], "{} listed twice", ent.name);
                seen[i] = true;
                assert_eq!(ent.attr.is_some(), plus);
            }
        }
        assert!(seen.iter().all(|s| *s), "every entry listed");
        eprintln!("listed {n} entries (plus={plus}) in {calls} calls, {:?}", t.elapsed());
    }
}
