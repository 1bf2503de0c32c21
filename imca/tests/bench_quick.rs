//! `imca bench` against a real cluster (2 storage servers, 1 cache node, a
//! FUSE gateway with its admin API): every benchmark `--quick`, then
//! `imca bench suite --quick` over the mount and a local directory. Checks
//! that each run succeeds, states the cluster's configuration (read from
//! the admin API), and writes JSON, CSV, SVG and PNG that parse. No timing
//! is asserted: speed belongs in docs/benchmarks.md.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn imca(args: &[&str]) -> String {
    let out = Command::new(IMCA).args(args).output().expect("running imca");
    assert!(
        out.status.success(),
        "imca {}: {}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// `<dir>/<stem>.json` parses as an outcome with rows, the CSV has a header
/// and one line per row, and both figures are real SVG and PNG.
fn check_outputs(dir: &Path, stem: &str, figures: bool) -> Value {
    let json: Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{stem}.json"))).expect("json written"))
        .expect("json parses");
    let rows = json["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{stem}: no rows");
    let columns = json["columns"].as_array().expect("columns");
    let csv = std::fs::read_to_string(dir.join(format!("{stem}.csv"))).expect("csv written");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), rows.len() + 1, "{stem}: csv has a header and one line per row");
    assert_eq!(lines[0].split(',').count(), columns.len());
    for l in &lines[1..] {
        for v in l.split(',') {
            v.parse::<f64>().unwrap_or_else(|_| panic!("{stem}: csv value {v:?} is not a number"));
        }
    }
    if figures {
        let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).expect("svg written");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{stem}.svg is SVG");
        let png = std::fs::read(dir.join(format!("{stem}.png"))).expect("png written");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png is PNG");
    }
    json
}

#[test]
fn every_benchmark_quick_and_the_suite_against_a_mount_and_a_local_dir() {
    let cluster = ClusterSpec::new()
        .storage(2)
        .cache(Cache::Imca(1))
        .gateway_arg("--admin")
        .gateway_arg("127.0.0.1:0")
        .start();
    let admin = cluster.gateways[0].admin_url().expect("admin URL");
    let mnt = cluster.mount().to_str().unwrap().to_string();
    let out = tempfile::tempdir().unwrap();
    let o = |s: &str| out.path().join(s).to_str().unwrap().to_string();
    // figures need a TrueType font (Debian: fonts-dejavu-core); without one
    // the benchmarks say so and write everything else
    let figures = Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists();

    // each benchmark once, smaller than --quick where a size can be given
    let runs: [(&str, &[&str]); 5] = [
        ("b1", &["stat", "--files", "300", "--clients", "1,2"]),
        ("b2", &["latency", "--direct", "--records", "64"]),
        ("b3", &["b3", "--direct", "--records", "64", "--clients", "2"]),
        ("b4", &["b4", "--size", "4M", "--threads", "1,2"]),
        ("b5", &["b5", "--direct", "--records", "64", "--clients", "1,2"]),
    ];
    for (stem, args) in runs {
        let dir = o(stem);
        let mut argv = vec!["bench"];
        argv.extend_from_slice(args);
        argv.extend(["--dir", &mnt, "--quick", "--json", "--quiet", "--admin", &admin, "--label", "imca", "--out", &dir]);
        let printed: Value = serde_json::from_str(imca(&argv).trim()).expect("--json prints one JSON object");
        let written = check_outputs(Path::new(&dir), stem, figures);
        assert_eq!(printed["rows"], written["rows"]);
        assert_eq!(written["bench"], stem.to_uppercase());
        // the configuration is stated, from the gateway's admin API
        let sys = &written["system"];
        assert_eq!(sys["nodes"], "1", "{stem}: {sys}");
        assert_eq!(sys["storage_servers"], "2");
        assert!(sys["block_size"].as_str().unwrap().parse::<u32>().is_ok(), "{stem}: {sys}");
        assert!(sys["fs_type"].as_str().unwrap().starts_with("fuse"), "{stem}: {sys}");
        assert_eq!(written["run"]["quick"], true);
    }
    // B1 swept the client counts asked for, and every client stat'ed every file
    let b1 = check_outputs(Path::new(&o("b1")), "b1", figures);
    let clients: Vec<f64> = b1["rows"].as_array().unwrap().iter().map(|r| r[0].as_f64().unwrap()).collect();
    assert_eq!(clients, [1.0, 2.0]);

    // the suite: the mount (baseline) and a local directory, one report
    let local = tempfile::tempdir().unwrap();
    let suite = o("suite");
    let target = format!("imca={mnt},admin={admin}");
    let local_target = format!("local={}", local.path().display());
    imca(&[
        "bench", "suite", "--quick", "--quiet", "--target", &target, "--target", &local_target, "--out", &suite,
        // smaller than --quick: a debug gateway on a busy machine is slow
        "--files", "300", "--records", "64", "--size", "4M", "--change-files", "60", "--entries", "200",
    ]);
    let suite = Path::new(&suite);
    let report = std::fs::read_to_string(suite.join("report.md")).expect("report.md");
    assert!(report.contains("## Beside the dissertation"), "{report}");
    for b in ["B1", "B2", "B3", "B4", "B5"] {
        assert!(report.contains(&format!("## {b} ")), "{b} missing from the report");
        assert!(report.contains(&format!("| {b} | ")), "{b} missing from the comparison");
    }
    assert!(report.contains("local: "), "ratios of the local dir against the mount");
    assert!(report.contains("| ops/s (× imca) | create+write |"), "the change benchmark ran last, on both");
    for stem in ["b1", "b2", "b3", "b4", "b5"] {
        for t in ["imca", "local"] {
            check_outputs(&suite.join(t), stem, false);
        }
        if figures {
            let svg = std::fs::read_to_string(suite.join(format!("{stem}.svg"))).unwrap();
            assert!(svg.contains("imca") && svg.contains("local"), "{stem}.svg has a line per target");
            assert!(report.contains(&format!("]({stem}.svg)")));
        }
    }
    let all: Value = serde_json::from_slice(&std::fs::read(suite.join("results.json")).unwrap()).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 2);
    assert_eq!(all[0]["direct"], true, "the FUSE mount takes unaligned O_DIRECT");
}
