//! The client process (`imca bench client`, hidden): what one of the K
//! clients of B1, B3, B4 and B5 does between the benchmark's barriers, and
//! what it reports. Its stdin and stdout are the barrier stream (see
//! [`crate::barrier`]); it prints nothing else on stdout.

use crate::barrier::Member;
use crate::records;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What the clients of one pool do (sent as JSON on their command line).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Job {
    /// B1: one barrier, then stat every file `passes` times.
    Stat { names: PathBuf, files: usize, passes: usize },
    /// B3 / B5: per record size: barrier, write phase, barrier, read phase,
    /// result. B3 (`shared: false`): every client its own file. B5
    /// (`shared: true`): one file, written by client 0 only, read by all.
    Latency { dir: PathBuf, tag: String, sizes: Vec<usize>, records: usize, direct: bool, shared: bool },
    /// B4: one barrier, then read slice `index` of `clients` of the file.
    Read { file: PathBuf, size: u64, clients: usize, record: usize, direct: bool },
}

impl Job {
    /// The job as client `k` runs it: its paths on that client's mount.
    pub fn rebased(&self, m: &crate::mounts::Mounts, k: usize) -> Job {
        let mut j = self.clone();
        match &mut j {
            Job::Stat { names, .. } => *names = m.rebase(names, k),
            Job::Latency { dir, .. } => *dir = m.rebase(dir, k),
            Job::Read { file, .. } => *file = m.rebase(file, k),
        }
        j
    }
}

/// A client's timed span, on the machine-wide monotonic clock.
#[derive(Debug, Serialize, Deserialize)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
}

/// One record size's per-operation times (ns) of one client.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Ops {
    pub write_ns: Vec<u64>,
    pub read_ns: Vec<u64>,
}

/// The file of client `index` (or the shared file) for record size `r`.
pub fn latency_file(dir: &std::path::Path, tag: &str, shared: bool, index: usize, r: usize) -> PathBuf {
    if shared {
        dir.join(format!("{tag}-shared-r{r}"))
    } else {
        dir.join(format!("{tag}-c{index}-r{r}"))
    }
}

/// B1's file names: `<names>/f0000000` …
pub fn stat_name(names: &std::path::Path, i: usize) -> PathBuf {
    names.join(format!("f{i:07}"))
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub index: usize,
    #[arg(long)]
    pub job: String,
}

pub fn main(a: &Args) -> anyhow::Result<()> {
    let job: Job = serde_json::from_str(&a.job)?;
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    run(a.index, &job, &mut Member::new(stdin, stdout))
}

pub fn run<R: std::io::BufRead, W: std::io::Write>(index: usize, job: &Job, m: &mut Member<R, W>) -> anyhow::Result<()> {
    match job {
        Job::Stat { names, files, passes } => {
            m.barrier()?;
            let start_ns = records::monotonic_ns();
            for pass in 0..*passes {
                // clients start at different files so they do not march in lockstep
                let first = (index * 7919 + pass * 104_729) % (*files).max(1);
                for i in 0..*files {
                    let p = stat_name(names, (first + i) % files);
                    std::fs::metadata(&p).map_err(|e| anyhow::anyhow!("stat {}: {e}", p.display()))?;
                }
            }
            m.send(&Span { start_ns, end_ns: records::monotonic_ns(), bytes: 0 })
        }
        Job::Latency { dir, tag, sizes, records: n, direct, shared } => {
            for &r in sizes {
                let path = latency_file(dir, tag, *shared, index, r);
                let mut ops = Ops::default();
                m.barrier()?;
                if !*shared || index == 0 {
                    ops.write_ns = records::write(&path, r, *n, *direct)?;
                }
                m.barrier()?;
                ops.read_ns = records::read(&path, r, *n, *direct)?;
                m.send(&ops)?;
            }
            Ok(())
        }
        Job::Read { file, size, clients, record, direct } => {
            let (from, to) = slice(*size, *clients, index);
            m.barrier()?;
            let start_ns = records::monotonic_ns();
            let bytes = records::read_slice(file, from, to, *record, *direct)?;
            m.send(&Span { start_ns, end_ns: records::monotonic_ns(), bytes })
        }
    }
}

/// Client `i` of `k` reads `[from, to)`: contiguous slices, whole records
/// except the last, together the whole file.
pub fn slice(size: u64, k: usize, i: usize) -> (u64, u64) {
    let k = k.max(1) as u64;
    let per = size.div_ceil(k);
    let from = (per * i as u64).min(size);
    (from, (from + per).min(size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_gets_its_paths_on_its_own_mount() {
        let m = crate::mounts::Mounts::new(std::path::Path::new("/g0"), &["/g1".into()]);
        let job = Job::Stat { names: "/g0/imca-bench-b1".into(), files: 3, passes: 1 };
        let Job::Stat { names, .. } = job.rebased(&m, 1) else { unreachable!() };
        assert_eq!(names, std::path::Path::new("/g1/imca-bench-b1"));
        let job = Job::Read { file: "/g0/imca-bench-b4/big".into(), size: 1, clients: 2, record: 1, direct: false };
        let Job::Read { file, .. } = job.rebased(&m, 2) else { unreachable!() };
        assert_eq!(file, std::path::Path::new("/g0/imca-bench-b4/big"));
        let job = Job::Latency { dir: "/g0/b5".into(), tag: "k2".into(), sizes: vec![1], records: 1, direct: false, shared: true };
        let Job::Latency { dir, .. } = job.rebased(&m, 1) else { unreachable!() };
        assert_eq!(latency_file(&dir, "k2", true, 1, 1), std::path::Path::new("/g1/b5/k2-shared-r1"));
    }

    #[test]
    fn slices_tile_the_file() {
        for (size, k) in [(100u64, 3usize), (1 << 20, 8), (5, 8)] {
            let mut next = 0;
            for i in 0..k {
                let (a, b) = slice(size, k, i);
                assert_eq!(a, next);
                assert!(b >= a);
                next = b;
            }
            assert_eq!(next, size);
        }
    }
}
