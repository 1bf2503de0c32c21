//! K client processes for one benchmark phase sequence: the `imca` binary
//! re-run as `imca bench client --index i --job JSON` (hidden), each tied
//! to the benchmark by its stdin and stdout, which carry the
//! [`crate::barrier`] protocol. The dissertation's clients were processes,
//! so ours are too: no shared address space, allocator or runtime between
//! clients, each with its own file descriptors as on separate hosts.
//!
//! Clients inherit stderr (their errors show up in the benchmark's
//! output). A pool that is dropped before [`Pool::finish`] (an error in the
//! benchmark) kills and reaps its clients, so nothing is left running.

use crate::barrier::Leader;
use crate::client::Job;
use crate::mounts::Mounts;
use anyhow::Context;
use std::io::BufReader;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The program clients run: `$IMCA_BENCH_EXE` (for embedding the bench
/// library in another binary), else this executable.
fn client_exe() -> anyhow::Result<std::ffi::OsString> {
    if let Some(p) = std::env::var_os("IMCA_BENCH_EXE") {
        return Ok(p);
    }
    Ok(std::env::current_exe().context("finding this executable to start the client processes")?.into())
}

pub struct Pool {
    children: Vec<Child>,
    leader: Option<Leader<BufReader<ChildStdout>, ChildStdin>>,
}

impl Pool {
    /// Start `k` clients running `job`, client i through mount i mod N of
    /// `mounts` (see [`Mounts`]). They wait at their first barrier.
    pub fn spawn(job: &Job, k: usize, mounts: &Mounts) -> anyhow::Result<Pool> {
        let exe = client_exe()?;
        let mut pool = Pool { children: Vec::with_capacity(k), leader: None };
        let mut streams = Vec::with_capacity(k);
        for i in 0..k {
            let json = serde_json::to_string(&job.rebased(mounts, i))?;
            let mut child = Command::new(&exe)
                .args(["bench", "client", "--index", &i.to_string(), "--job", &json])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting client process {i} ({})", exe.to_string_lossy()))?;
            let (Some(w), Some(r)) = (child.stdin.take(), child.stdout.take()) else {
                anyhow::bail!("client {i} has no pipes");
            };
            pool.children.push(child);
            streams.push((BufReader::new(r), w));
        }
        pool.leader = Some(Leader::new(streams));
        Ok(pool)
    }

    pub fn leader(&mut self) -> &mut Leader<BufReader<ChildStdout>, ChildStdin> {
        self.leader.as_mut().expect("pool is running")
    }

    /// Close the clients' streams and wait for them; any failure is an error.
    pub fn finish(mut self) -> anyhow::Result<()> {
        drop(self.leader.take());
        let mut failed = Vec::new();
        for (i, c) in self.children.iter_mut().enumerate() {
            let status = c.wait().with_context(|| format!("waiting for client {i}"))?;
            if !status.success() {
                failed.push(format!("client {i}: {status}"));
            }
        }
        self.children.clear();
        anyhow::ensure!(failed.is_empty(), "client processes failed: {}", failed.join(", "));
        Ok(())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        drop(self.leader.take());
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
