//! Shared pieces: cache dropping, client threads behind a barrier.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Drop the page, dentry and inode caches (root only).
pub fn drop_caches() -> anyhow::Result<()> {
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n")
        .map_err(|e| anyhow::anyhow!("--cold needs root to write /proc/sys/vm/drop_caches: {e}"))
}

/// Run `work(client)` on `clients` threads started together; each returns
/// its own elapsed time.
pub fn timed_clients<F>(clients: usize, work: F) -> anyhow::Result<Vec<Duration>>
where
    F: Fn(usize) -> anyhow::Result<()> + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let barrier = Arc::new(Barrier::new(clients));
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            let (w, b) = (work.clone(), barrier.clone());
            std::thread::spawn(move || -> anyhow::Result<Duration> {
                b.wait();
                let t = Instant::now();
                w(c)?;
                Ok(t.elapsed())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("client panicked"))?).collect()
}
