//! `imca bench suite`: B1–B5 and the change benchmark against every target
//! (any mounted directory), then one report: `OUT/report.md` with the
//! dissertation's results beside ours (every ratio against the baseline
//! target, measured in the same run), one figure per benchmark with a line
//! (the change benchmark: a bar) per target (`OUT/b1.svg|png` …), and each
//! target's JSON and CSV (`OUT/<target>/b1.json|csv` …; all of it in
//! `OUT/results.json`). The change benchmark's rounds and summary are
//! [`crate::suite_changes`].

use crate::config::{System, SystemArgs};
use crate::dissertation::{self, CLAIMS};
use crate::outcome::Outcome;
use crate::suite_changes::{self, Changes};
use crate::{b1, b2, b3, b4, b5, changes, figure, records, Common, Sweep};
use anyhow::{bail, Context};
use std::fmt::Write as _;
use std::path::PathBuf;

pub const ABOUT: &str = "Every benchmark on every target, and one report.

  imca bench suite --target nocache=/mnt/a,cluster=/run/a/cluster.json \\
                   --target imca-4nodes=/mnt/b,cluster=/run/b/cluster.json \\
                   --target local=/var/tmp/x --out results/ [--quick]

A target is NAME=DIR, optionally followed by ,cluster=FILE (the cluster.json
`imca up` wrote) or ,admin=URL (a gateway's admin API) to read block size,
nodes, placement and transport from IMCa, and ,block_size=…, ,nodes=…,
,placement=…, ,transport=… to state them for other mounts (GlusterFS, a
local directory). NAME=DIR1:DIR2[:…] is one volume through several mounts
(several gateways, e.g. `bench/testbed --gateways 2`): client k of B1, B3,
B4 and B5 works through mount k mod N, at the same relative paths, and the
files a benchmark prepares are made through DIR1 (B2, one client, uses
DIR1). ,before=CMD runs CMD (sh -c; no commas) just before the
target, so one mount can be several targets: e.g. `imca ctl cache-nodes rm
ADDR` between `n4=/mnt,admin=URL` and `n2=/mnt,admin=URL,before=…`. The first target is the baseline every ratio is taken
against (--baseline NAME to choose another): typically IMCa with no cache
nodes. Targets run one after the other, B1 to B5 and then the change
benchmark each (--only b1,b4 or --only changes to pick),
with each benchmark's defaults (--quick: the small sizes; --files, --records,
--max, --size and --clients change them). Latency
benchmarks use O_DIRECT where the target takes unaligned O_DIRECT (FUSE
mounts do; the report says which).

The change benchmark runs after B1–B5 of every target, --rounds times per
target (1), alternated: round 1 on every target, then round 2 …; with a
before= command on any target it runs instead right after that target's
B1–B5, its rounds one after the other. Every target untars the same tree
(--tarball, or one built once per run from the cargo registry: --entries),
and a tree that comes out different fails the run once the report is written.

Writes OUT/report.md (targets, the dissertation's results beside ours, one
figure and one table per benchmark), OUT/b1.svg … OUT/b5.svg and
OUT/changes.svg (and .png), and OUT/NAME/bN.json|csv and changes.json|csv
per target. Nothing is started or mounted here: bring the targets up first (e.g. `imca up --cache-nodes 0|1|2|4`).";

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// NAME=DIR[:DIR…][,cluster=FILE|,admin=URL][,block_size=…][,nodes=…][,placement=…][,transport=…][,before=CMD]
    #[arg(long = "target", required = true, value_name = "NAME=DIR[:DIR…][,…]")]
    pub targets: Vec<String>,
    /// Where the report, figures and data go.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Small sizes, for CI and quick looks.
    #[arg(long)]
    pub quick: bool,
    /// Drop the kernel caches before each timed phase (needs root).
    #[arg(long)]
    pub cold: bool,
    /// The target every ratio is against (default: the first).
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Run only these benchmarks (e.g. b1,b4, or changes).
    #[arg(long, value_delimiter = ',', value_name = "bN|changes,…")]
    pub only: Vec<String>,
    /// Never use O_DIRECT (default: where the target takes it).
    #[arg(long)]
    pub no_direct: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// B1's file count, instead of the default (262,144; --quick: 2,048).
    #[arg(long, value_name = "N")]
    pub files: Option<usize>,
    /// Records per size in B2, B3, B5 (1024; --quick: 256).
    #[arg(long, value_name = "N")]
    pub records: Option<usize>,
    /// Largest record size in B2, B3, B5 (64 KiB; --quick: 4 KiB).
    #[arg(long, value_name = "BYTES")]
    pub max: Option<usize>,
    /// B4's file size (1G; --quick: 32M).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Client processes of B1, B3, B5 and readers of B4, as a sweep (e.g.
    /// 1,2,4,8), instead of each benchmark's own.
    #[arg(long, value_delimiter = ',', value_name = "K,…")]
    pub clients: Vec<usize>,
    /// The change benchmark's file count (2000; --quick: 300).
    #[arg(long, value_name = "N")]
    pub change_files: Option<usize>,
    /// The tree the change benchmark untars, instead of one built from the cargo registry.
    #[arg(long, value_name = "FILE")]
    pub tarball: Option<PathBuf>,
    /// About how many entries the built tree has (4000; --quick: 800).
    #[arg(long, value_name = "N")]
    pub entries: Option<usize>,
    /// Runs of the change benchmark per target, alternated between targets.
    #[arg(long, default_value_t = 1, value_name = "R")]
    pub rounds: usize,
}

/// One `--target`.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub dir: PathBuf,
    /// The same volume through more mounts (`NAME=DIR:DIR2:…`), clients spread over all.
    pub other_dirs: Vec<PathBuf>,
    pub system: SystemArgs,
    /// A shell command run just before this target's benchmarks (e.g. `imca
    /// ctl cache-nodes rm …`), so one mount can be several targets: the
    /// same cluster with 4, 2, 1 and 0 cache nodes in one run.
    pub before: Option<String>,
}

pub fn parse_target(s: &str) -> anyhow::Result<Target> {
    let (name, rest) = s.split_once('=').context("a target is NAME=DIR[,key=value…]")?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) || name.starts_with('.') {
        bail!("target name {name:?}: use letters, digits, '.', '_', '-' (it names a directory of the report)");
    }
    let mut parts = rest.split(',');
    let mut dirs = parts.next().unwrap_or_default().split(':').map(PathBuf::from);
    let dir = dirs.next().unwrap_or_default();
    let other_dirs: Vec<PathBuf> = dirs.collect();
    if dir.as_os_str().is_empty() || other_dirs.iter().any(|d| d.as_os_str().is_empty()) {
        bail!("target {name}: no directory (NAME=DIR or NAME=DIR1:DIR2:…)");
    }
    let mut system = SystemArgs::default();
    let mut before = None;
    for kv in parts {
        let (k, v) = kv.split_once('=').with_context(|| format!("target {name}: {kv:?} is not key=value"))?;
        match k {
            "cluster" => system.cluster = Some(v.into()),
            "admin" => system.admin = Some(v.into()),
            "block_size" => system.block_size = Some(v.into()),
            "nodes" => system.nodes = Some(v.into()),
            "placement" => system.placement = Some(v.into()),
            "transport" => system.transport = Some(v.into()),
            "before" => before = Some(v.into()),
            _ => bail!("target {name}: unknown key {k:?} (cluster, admin, block_size, nodes, placement, transport, before)"),
        }
    }
    Ok(Target { name: name.into(), dir, other_dirs, system, before })
}

const BENCHES: [&str; 6] = ["b1", "b2", "b3", "b4", "b5", "changes"];

struct Ran {
    target: Target,
    system: System,
    direct: bool,
    outcomes: Vec<Outcome>,
}

pub fn run(a: &Args) -> anyhow::Result<()> {
    let targets = a.targets.iter().map(|t| parse_target(t)).collect::<anyhow::Result<Vec<_>>>()?;
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].iter().any(|u| u.name == t.name) {
            bail!("two targets are named {}", t.name);
        }
        for d in std::iter::once(&t.dir).chain(&t.other_dirs) {
            if !d.is_dir() {
                bail!("target {}: {} is not a directory", t.name, d.display());
            }
        }
    }
    let baseline = a.baseline.clone().unwrap_or_else(|| targets[0].name.clone());
    if !targets.iter().any(|t| t.name == baseline) {
        bail!("--baseline {baseline} is not a target");
    }
    let only: Vec<String> = if a.only.is_empty() {
        BENCHES.map(String::from).to_vec()
    } else {
        a.only.iter().map(|b| b.to_lowercase()).collect()
    };
    if let Some(b) = only.iter().find(|b| !BENCHES.contains(&b.as_str())) {
        bail!("--only {b}: not one of {}", BENCHES.join(", "));
    }
    std::fs::create_dir_all(&a.out)?;
    // one tree for every target, made before the first is measured
    let change_bench = if only.iter().any(|b| b == "changes") {
        let common = common_of(a, None);
        let args = changes::Args { common, files: a.change_files, tarball: a.tarball.clone(), entries: a.entries };
        Some(Changes::new(args, a.rounds)?)
    } else {
        None
    };
    // alternating rounds would run a target after the next one's before= changed the system
    let alternate = targets.iter().all(|t| t.before.is_none());

    let mut ran = Vec::new();
    for t in targets {
        if let Some(cmd) = &t.before {
            run_before(&t.name, cmd)?;
        }
        // stated before the run: a wrong cluster file fails now, not after an hour
        let system = t.system.describe(&t.dir)?;
        let direct = !a.no_direct && records::direct_works(&t.dir);
        let through = t.other_dirs.iter().fold(String::new(), |s, d| s + ":" + &d.to_string_lossy());
        eprintln!(
            "== target {} ({}{through}, {}; O_DIRECT {})",
            t.name,
            t.dir.display(),
            system.fs_type,
            if direct { "yes" } else { "no" }
        );
        let common = common_of(a, Some(&t));
        let sweep = Sweep { direct, records: a.records, max: a.max, ..Default::default() };
        let mut outcomes = Vec::new();
        for b in only.iter().filter(|b| *b != "changes") {
            let o = match b.as_str() {
                "b1" => b1::run(&b1::Args { common: common.clone(), passes: 1, files: a.files, keep: false }, &system)?,
                "b2" => b2::run(&b2::Args { common: common.clone(), sweep: sweep.clone(), read_passes: 1 }, &system)?,
                "b3" => b3::run(&b3::Args { common: common.clone(), sweep: sweep.clone() }, &system)?,
                "b4" => {
                    let args = b4::Args { common: common.clone(), record: 128 << 10, size: a.size.clone(), ..Default::default() };
                    b4::run(&args, &system)?
                },
                _ => b5::run(&b5::Args { common: common.clone(), sweep: sweep.clone() }, &system)?,
            };
            keep(a, &t.name, b, o, &mut outcomes)?;
        }
        if let Some(ch) = change_bench.as_ref().filter(|_| !alternate) {
            let rounds = (1..=ch.rounds).map(|r| ch.round(&common, &system, r)).collect::<anyhow::Result<Vec<_>>>()?;
            keep(a, &t.name, "changes", suite_changes::merge(rounds), &mut outcomes)?;
        }
        ran.push(Ran { target: t, system, direct, outcomes });
    }
    if let Some(ch) = change_bench.as_ref().filter(|_| alternate) {
        let mut rounds: Vec<Vec<Outcome>> = ran.iter().map(|_| Vec::new()).collect();
        for r in 1..=ch.rounds {
            for (x, of) in ran.iter().zip(&mut rounds) {
                of.push(ch.round(&common_of(a, Some(&x.target)), &x.system, r)?);
            }
        }
        for (x, of) in ran.iter_mut().zip(rounds) {
            keep(a, &x.target.name, "changes", suite_changes::merge(of), &mut x.outcomes)?;
        }
    }

    // legends name the target and, where known, its cache nodes (B4's
    // "MB/s vs nodes" is read off them)
    let legends: Vec<String> = ran
        .iter()
        .map(|r| match r.system.nodes.as_str() {
            "unknown" => r.target.name.clone(),
            n => format!("{}, nodes={n}", r.target.name),
        })
        .collect();
    let mut figures = Vec::new();
    for b in &only {
        let pairs: Vec<(&str, &Outcome)> = ran
            .iter()
            .zip(&legends)
            .filter_map(|(r, l)| r.outcomes.iter().find(|o| o.bench.eq_ignore_ascii_case(b)).map(|o| (l.as_str(), o)))
            .collect();
        let drawn = match b.as_str() {
            "changes" => changes::draw(&pairs, &a.out, b),
            _ => figure::draw(&spec(b), &figure::series(&spec(b), &pairs), &a.out, b),
        };
        match drawn {
            Ok(_) => figures.push(b.clone()),
            Err(e) => eprintln!("imca bench suite: no figure for {b}: {e}"),
        }
    }
    let all: Vec<serde_json::Value> = ran
        .iter()
        .map(|r| serde_json::json!({"target": r.target.name, "direct": r.direct, "outcomes": r.outcomes}))
        .collect();
    std::fs::write(a.out.join("results.json"), serde_json::to_vec_pretty(&all)?)?;
    let report = a.out.join("report.md");
    std::fs::write(&report, markdown(a, &ran, &baseline, &only, &figures))?;
    println!("wrote {}", report.display());
    let failed: Vec<String> = ran
        .iter()
        .flat_map(|r| {
            let failed = r.outcomes.iter().filter_map(|o| changes::verdict(o).err());
            failed.map(|e| format!("target {}: {e}", r.target.name))
        })
        .collect();
    if !failed.is_empty() {
        bail!("{}", failed.join("\n"));
    }
    Ok(())
}

/// What every benchmark of target `t` is run with (None: no target, for
/// what the run shares).
fn common_of(a: &Args, t: Option<&Target>) -> Common {
    let mut c = Common { clients: a.clients.clone(), cold: a.cold, quick: a.quick, quiet: a.quiet, ..Default::default() };
    if let Some(t) = t {
        (c.dir, c.other_dirs, c.label, c.system) = (t.dir.clone(), t.other_dirs.clone(), t.name.clone(), t.system.clone());
    }
    c
}

/// Show a target's result of benchmark `b`, write it to OUT/NAME/b.json|csv, keep it for the report.
fn keep(a: &Args, target: &str, b: &str, o: Outcome, outcomes: &mut Vec<Outcome>) -> anyhow::Result<()> {
    if !a.quiet {
        eprint!("{}", o.table());
    }
    o.write(&a.out.join(target), b)?;
    outcomes.push(o);
    Ok(())
}

/// A target's `before=` command, through `sh -c`; its failure ends the run
/// (the target would not be what the report says it is).
fn run_before(target: &str, cmd: &str) -> anyhow::Result<()> {
    eprintln!("== target {target}: before: {cmd}");
    let status = std::process::Command::new("sh")
        .args(["-c", cmd])
        .status()
        .with_context(|| format!("target {target}: running its before= command"))?;
    if !status.success() {
        bail!("target {target}: before= command {cmd:?} failed ({status})");
    }
    Ok(())
}

/// Two decimals, more for small ratios (a local page cache against FUSE is
/// 0.003, not 0.00).
fn ratio(x: f64) -> String {
    let decimals = if x > 0.0 && x < 0.1 { (1.0 - x.log10().floor()) as usize } else { 2 };
    format!("{x:.decimals$}")
}

fn spec(bench: &str) -> figure::Spec {
    match bench {
        "b1" => b1::spec(),
        "b2" => b2::spec(),
        "b3" => b3::spec(),
        "b4" => b4::spec(),
        _ => b5::spec(),
    }
}

fn markdown(a: &Args, ran: &[Ran], baseline: &str, only: &[String], figures: &[String]) -> String {
    let mut m = String::new();
    let argv: Vec<String> = std::env::args().collect();
    let _ = writeln!(m, "# IMCa benchmark report\n");
    let _ = writeln!(m, "Command: `{}`  ", argv.join(" "));
    let _ = writeln!(
        m,
        "Sizes: {}; caches {}; ratios are against **{baseline}**, measured in this run.\n",
        if a.quick { "--quick (small: not comparable in size with the dissertation's runs)" } else { "the dissertation's" },
        if a.cold { "dropped before every timed phase (--cold)" } else { "warm" }
    );
    let _ = writeln!(m, "## Targets\n");
    let _ = writeln!(m, "| target | directory | fs | block size | nodes | placement | transport | storage servers | O_DIRECT |");
    let _ = writeln!(m, "|---|---|---|---|---|---|---|---|---|");
    for r in ran {
        let s = &r.system;
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target.name,
            match r.target.other_dirs.len() {
                0 => s.target.display().to_string(),
                n => format!("{} and {n} more mount(s) of it, clients spread over all", s.target.display()),
            },
            s.fs_type,
            s.block_size,
            s.nodes,
            s.placement,
            s.transport,
            s.storage_servers,
            if r.direct { "yes" } else { "no (page cache)" }
        );
    }
    let claims: Vec<_> = CLAIMS.iter().filter(|c| only.iter().any(|b| b.eq_ignore_ascii_case(c.bench))).collect();
    if !claims.is_empty() {
        let _ = writeln!(m, "\n## Beside the dissertation\n\nSource: {}.\n", dissertation::SOURCE);
        let _ = writeln!(m, "| bench | dissertation's setting | theirs (with ÷ without) | goal | ours | at |");
        let _ = writeln!(m, "|---|---|---|---|---|---|");
    }
    let base = ran.iter().find(|r| r.target.name == baseline);
    for c in claims {
        let find = |r: &Ran| r.outcomes.iter().find(|o| o.bench == c.bench).cloned();
        let mut ours = Vec::new();
        for r in ran.iter().filter(|r| r.target.name != baseline) {
            let got = match (find(r), base.and_then(find)) {
                (Some(o), Some(b)) => dissertation::ours(c.metric, &o, &b),
                _ => None,
            };
            match got {
                Some((x, at)) => ours.push((format!("{}: {}", r.target.name, ratio(x)), at)),
                None => ours.push((format!("{}: n/a", r.target.name), String::new())),
            }
        }
        let (vals, at): (Vec<String>, Vec<String>) = ours.into_iter().unzip();
        let mut at: Vec<String> = at.into_iter().filter(|s| !s.is_empty()).collect();
        at.dedup();
        let _ = writeln!(
            m,
            "| {} | {} | {:.2}: {} | {} | {} | {} |",
            c.bench,
            c.setting,
            c.ratio,
            c.text,
            c.goal,
            vals.join("; "),
            at.join("; ")
        );
    }
    for b in only {
        let Some(first) = ran.iter().find_map(|r| r.outcomes.iter().find(|o| o.bench.eq_ignore_ascii_case(b))) else {
            continue;
        };
        let _ = writeln!(m, "\n## {} {}\n", first.bench, first.name);
        if figures.contains(b) {
            let _ = writeln!(m, "![{} {}]({b}.svg)\n", first.bench, first.name);
        }
        if b == "changes" {
            let all: Vec<(&str, &Outcome)> = ran
                .iter()
                .filter_map(|r| r.outcomes.iter().find(|o| o.bench == "changes").map(|o| (r.target.name.as_str(), o)))
                .collect();
            let _ = writeln!(m, "{}", suite_changes::across(&all, baseline, ratio));
        }
        for r in ran {
            if let Some(o) = r.outcomes.iter().find(|o| o.bench.eq_ignore_ascii_case(b)) {
                let _ = writeln!(m, "**{}** — `{}`\n\n{}\n", r.target.name, o.config_line(), o.markdown());
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_keep_two_significant_digits() {
        assert_eq!(ratio(0.5), "0.50");
        assert_eq!(ratio(2.08), "2.08");
        assert_eq!(ratio(0.0034), "0.0034");
        assert_eq!(ratio(0.034), "0.034");
    }

    #[test]
    fn targets_parse() {
        let t = parse_target("imca-4=/mnt/x,cluster=/d/cluster.json,nodes=4").unwrap();
        assert_eq!((t.name.as_str(), t.dir.to_str().unwrap()), ("imca-4", "/mnt/x"));
        assert_eq!(t.system.cluster.unwrap().to_str().unwrap(), "/d/cluster.json");
        assert_eq!(t.system.nodes.as_deref(), Some("4"));
        assert!(parse_target("noequals").is_err());
        assert!(parse_target("a b=/x").is_err(), "a name is a directory of the report");
        assert!(parse_target("../x=/x").is_err());
        assert!(parse_target("a=").is_err());
        assert!(parse_target("a=/x,colour=red").unwrap_err().to_string().contains("unknown key"));
        let t = parse_target("n0=/mnt/x,admin=http://127.0.0.1:9470,before=imca ctl cache-nodes rm 10.0.0.1:11211").unwrap();
        assert_eq!(t.before.as_deref(), Some("imca ctl cache-nodes rm 10.0.0.1:11211"));
        assert!(t.other_dirs.is_empty(), "colons elsewhere do not make mounts");
    }

    #[test]
    fn a_target_spans_several_mounts_of_one_volume() {
        let t = parse_target("n4=/tb/mnt:/tb/mnt-1:/tb/mnt-2,admin=http://127.0.0.1:9470").unwrap();
        assert_eq!(t.dir, PathBuf::from("/tb/mnt"));
        assert_eq!(t.other_dirs, [PathBuf::from("/tb/mnt-1"), PathBuf::from("/tb/mnt-2")]);
        assert_eq!(t.system.admin.as_deref(), Some("http://127.0.0.1:9470"));
        assert!(parse_target("n4=/tb/mnt:").is_err(), "an empty mount");
        assert!(parse_target("n4=:/tb/mnt").is_err(), "an empty first mount");
        let one = parse_target("n4=/tb/mnt").unwrap();
        assert!(one.other_dirs.is_empty());
        let a = crate::parse(&["suite", "--target", "n0=/g0:/g1", "--out", "/o", "--clients", "1,4"]).unwrap();
        let crate::Which::Suite(s) = a.which else { panic!("suite") };
        assert_eq!(s.clients, [1, 4]);
        assert_eq!(parse_target(&s.targets[0]).unwrap().other_dirs, [PathBuf::from("/g1")]);
    }

    #[test]
    fn a_failing_before_command_ends_the_run() {
        run_before("t", "true").unwrap();
        let e = run_before("t", "exit 3").unwrap_err().to_string();
        assert!(e.contains("before= command") && e.contains("failed"), "{e}");
    }
}
