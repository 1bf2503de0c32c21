//! The change benchmark (issue 34): how fast a file system makes changes.
//! One client — this process, doing ordinary syscalls — in a fresh
//! directory of the target: create + write 4 KiB + close of N files, rename
//! each, unlink each, mkdir N/4 directories, rmdir them, untar a real tree
//! ([`crate::untar`], [`crate::tarball`]) and `rm -rf` it. Each phase is timed
//! on its own, after a sync so one phase's writeback is not billed to the
//! next. Reported per phase: count, seconds, ops/s (entries/s for untar and
//! rm -rf); the figure is a bar chart of ops/s per phase, a bar per target.

use crate::bars::{self, Bars};
use crate::change_phases::{self as phases, Workdir, FILE_BYTES};
use crate::config::System;
use crate::outcome::{Outcome, RowNames};
use crate::progress::Progress;
use crate::tarball::Tarball;
use crate::untar;
use crate::Common;
use anyhow::{bail, ensure};
use std::path::{Path, PathBuf};

pub const ABOUT: &str = "The change benchmark: how fast a file system makes changes.

One client (this process, ordinary syscalls) in a fresh DIR/imca-bench-changes,
each phase timed on its own after a sync(2): create + write 4 KiB + close of N
files (O_CREAT|O_EXCL, 0644; N = 2000, --quick: 300), rename each in the same
directory, unlink each, mkdir N/4 directories, rmdir them, untar a real tree
with the system's `tar -xf`, and remove it (`rm -rf`, in this process).
Reported per phase: count, seconds, ops/s (entries/s for untar and rm -rf);
figure: ops/s per phase, a bar per target (log axis).

The tree is --tarball FILE, or one built once per run, outside DIR, from the
cargo registry's crate sources (whole crates in name order until about
--entries entries: 4000, --quick: 800). The untarred tree is checked with
`tar --compare`: names, types, sizes and contents must match, or the run
fails; whether mtimes and modes were kept is reported apart (bindfs does not
keep mtimes). Everything made under DIR is removed, even when a phase fails.
Run it on an IMCa mount, bindfs and a local directory to compare, or use
`imca bench suite` with one target each.";

/// The phases, in the order they run; the rows of the result.
pub const PHASES: [&str; 7] = ["create+write", "rename", "unlink", "mkdir", "rmdir", "untar", "rm -rf"];

#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// Files created, renamed and unlinked (default 2000; --quick: 300); a
    /// quarter as many directories are made and removed.
    #[arg(long, value_name = "N")]
    pub files: Option<usize>,
    /// The tree to untar, instead of one built from the cargo registry.
    #[arg(long, value_name = "FILE")]
    pub tarball: Option<PathBuf>,
    /// About how many entries the built tree has (default 4000; --quick: 800).
    #[arg(long, value_name = "N")]
    pub entries: Option<usize>,
}

impl Args {
    pub fn files(&self) -> usize {
        self.files.unwrap_or(if self.common.quick { 300 } else { 2000 }).max(1)
    }
    pub fn entries(&self) -> usize {
        self.entries.unwrap_or(if self.common.quick { 800 } else { 4000 }).max(1)
    }
    /// The tree this run untars (built now unless --tarball names one).
    pub fn tarball(&self) -> anyhow::Result<Tarball> {
        if !self.common.quiet && self.tarball.is_none() {
            eprintln!("changes: building a tarball of about {} entries from the cargo registry", self.entries());
        }
        Tarball::get(self.tarball.as_deref(), self.entries())
    }
}

/// Run every phase in `a.common.dir`, untarring `tree`.
pub fn run(a: &Args, system: &System, tree: &Tarball) -> anyhow::Result<Outcome> {
    let c = &a.common;
    ensure!(
        c.other_dirs.is_empty() && c.clients.is_empty(),
        "the change benchmark is one client through --dir: --other-dirs and --clients do not apply"
    );
    let (n, dirs) = (a.files(), (a.files() / 4).max(1));
    let work = Workdir::fresh(&c.dir)?;
    let mut done: Vec<(usize, f64)> = Vec::new();
    let progress = |p: &str| Progress::new(format!("changes {p}"), c.quiet);

    let files = work.sub("files")?;
    settle(c.cold)?;
    done.push((n, phases::create(&files, n, &progress(PHASES[0]))?));
    settle(c.cold)?;
    done.push((n, phases::rename(&files, n, &progress(PHASES[1]))?));
    settle(c.cold)?;
    done.push((n, phases::unlink(&files, n, &progress(PHASES[2]))?));
    let subdirs = work.sub("dirs")?;
    settle(c.cold)?;
    done.push((dirs, phases::mkdir(&subdirs, dirs, &progress(PHASES[3]))?));
    settle(c.cold)?;
    done.push((dirs, phases::rmdir(&subdirs, dirs, &progress(PHASES[4]))?));

    let into = work.sub("tree")?;
    settle(c.cold)?;
    let p = progress(PHASES[5]);
    p.step(0, tree.entries, "entries");
    let (untar_s, said) = untar::extract(&tree.path, &into)?;
    p.done();
    let check = untar::compare(&tree.path, &into, &said)?;
    if check.identical {
        done.push((tree.entries, untar_s));
        settle(c.cold)?;
        let p = progress(PHASES[6]);
        p.step(0, tree.entries, "entries");
        let t = std::time::Instant::now();
        std::fs::remove_dir_all(&into).map_err(|e| anyhow::anyhow!("rm -rf {}: {e}", into.display()))?;
        done.push((tree.entries, t.elapsed().as_secs_f64()));
        p.done();
    } else if !c.quiet {
        // no rate for a tree that is not the tarball's; the workdir's drop removes it
        eprintln!("changes: the untarred tree differs from the tarball: {}", check.differences.join("; "));
    }
    drop(work);

    let mut run = serde_json::json!({
        "files": n,
        "file_bytes": FILE_BYTES,
        "dirs": dirs,
        "tarball": tree.source,
        "entries": tree.entries,
        "tarball_bytes": tree.bytes,
        "identical": check.identical,
        "mtimes_kept": check.mtimes_kept,
        "modes_kept": check.modes_kept,
    });
    if !check.identical {
        run["differences"] = serde_json::json!(check.differences);
    }
    let mut o = crate::outcome("changes", "files, directories, a real tree", c, system, run);
    o.columns = ["count", "seconds", "per_s", "us_per_op"].map(String::from).to_vec();
    let mut names = Vec::new();
    for (phase, (count, secs)) in PHASES.iter().zip(done) {
        names.push(phase.to_string());
        o.rows.push(vec![count as f64, secs, count as f64 / secs, secs / count as f64 * 1e6]);
    }
    o.names = Some(RowNames { column: "phase".into(), rows: names });
    Ok(o)
}

/// Sync before a timed phase (and with --cold drop the caches, which syncs).
fn settle(cold: bool) -> anyhow::Result<()> {
    if cold {
        crate::util::drop_caches()
    } else {
        // SAFETY: no preconditions.
        unsafe { libc::sync() };
        Ok(())
    }
}

/// A result with an untarred tree that was not the tarball's is a failed
/// run, whatever else it measured.
pub fn verdict(o: &Outcome) -> anyhow::Result<()> {
    if o.run["identical"] == false {
        bail!("{}: the untarred tree differs from the tarball: {}", o.system.target.display(), o.run["differences"]);
    }
    Ok(())
}

/// The rate of each phase of [`PHASES`], the median over the rows that
/// measured it (several when a suite ran rounds); None where none did (the
/// untar of a tree that differed).
pub fn rates(o: &Outcome) -> Vec<Option<f64>> {
    PHASES
        .iter()
        .map(|p| {
            let mut v: Vec<f64> =
                (0..o.rows.len()).filter(|&r| o.row_name(r) == *p).map(|r| o.get(&o.rows[r], "per_s")).collect();
            v.sort_by(f64::total_cmp);
            match v.len() {
                0 => None,
                n if n % 2 == 1 => Some(v[n / 2]),
                n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
            }
        })
        .collect()
}

/// The figure: ops/s per phase, a bar per (legend, outcome).
pub fn draw(outcomes: &[(&str, &Outcome)], dir: &Path, stem: &str) -> anyhow::Result<Vec<PathBuf>> {
    let series = outcomes
        .iter()
        .enumerate()
        .map(|(i, (legend, o))| {
            let legend = if legend.is_empty() { format!("run {}", i + 1) } else { legend.to_string() };
            (legend, rates(o))
        })
        .collect();
    let bars = Bars {
        title: "changes: ops/s per phase (untar, rm -rf: entries/s)".into(),
        y_label: "operations per second (log)".into(),
        categories: PHASES.map(String::from).to_vec(),
        series,
    };
    bars::draw(&bars, dir, stem)
}
