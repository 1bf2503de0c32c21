//! `imca bench changes --quick` against a plain temporary directory, and
//! the suite's change benchmark over two of them in alternated rounds:
//! every phase is measured with a positive rate, the untarred tree is the
//! tarball's, the outputs are written, and nothing is left in the target.
//! No timing is asserted (speed belongs in docs/benchmarks.md); no cluster
//! is started, so this runs in seconds.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const IMCA: &str = env!("CARGO_BIN_EXE_imca");
const PHASES: [&str; 7] = ["create+write", "rename", "unlink", "mkdir", "rmdir", "untar", "rm -rf"];

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

/// Every phase is a row, in order, with a positive count, time and rate.
fn every_phase_measured(o: &Value, rounds: usize) {
    let names: Vec<&str> = o["names"]["rows"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let want: Vec<&str> = (0..rounds).flat_map(|_| PHASES).collect();
    assert_eq!(names, want, "{o}");
    let columns: Vec<&str> = o["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    let col = |c: &str| columns.iter().position(|x| *x == c).unwrap_or_else(|| panic!("no column {c}: {columns:?}"));
    for row in o["rows"].as_array().unwrap() {
        for c in ["count", "seconds", "per_s"] {
            assert!(row[col(c)].as_f64().unwrap() > 0.0, "{c} of {row} in {o}");
        }
    }
    assert_eq!(o["run"]["identical"], true, "the untarred tree is the tarball's: {}", o["run"]);
    assert!(o["run"]["entries"].as_u64().unwrap() > 0);
}

#[test]
fn the_change_benchmark_on_a_local_directory_alone_and_in_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = out.path().join("one");
    let printed = imca(&[
        "bench", "changes", "--quick", "--dir", d, "--json", "--quiet", "--label", "local", "--out", o.to_str().unwrap(),
    ]);
    let printed: Value = serde_json::from_str(printed.trim()).expect("--json prints one JSON object");
    every_phase_measured(&printed, 1);
    assert_eq!(printed["run"]["files"], 300, "--quick");
    assert_eq!(printed["run"]["dirs"], 75);
    let written: Value = serde_json::from_slice(&std::fs::read(o.join("changes.json")).unwrap()).unwrap();
    assert_eq!(written["rows"], printed["rows"]);
    let csv = std::fs::read_to_string(o.join("changes.csv")).unwrap();
    assert!(csv.starts_with("phase,count,seconds,per_s,us_per_op\ncreate+write,300,"), "{csv}");
    if Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        let svg = std::fs::read_to_string(o.join("changes.svg")).unwrap();
        assert!(svg.contains("rm -rf") && svg.contains("local"), "a bar per phase, named");
        assert_eq!(&std::fs::read(o.join("changes.png")).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left in --dir");

    // the suite, two targets, two rounds alternated between them, smaller still
    let other = tempfile::tempdir().unwrap();
    let suite = out.path().join("suite");
    let (a, b) = (format!("a={d}"), format!("b={}", other.path().display()));
    imca(&[
        "bench", "suite", "--quick", "--quiet", "--only", "changes", "--rounds", "2", "--change-files", "60",
        "--entries", "200", "--target", &a, "--target", &b, "--out", suite.to_str().unwrap(),
    ]);
    for t in ["a", "b"] {
        let o: Value = serde_json::from_slice(&std::fs::read(suite.join(t).join("changes.json")).unwrap()).unwrap();
        every_phase_measured(&o, 2);
        assert_eq!(o["columns"][0], "round");
        assert_eq!(o["run"]["rounds"], 2);
    }
    let report = std::fs::read_to_string(suite.join("report.md")).unwrap();
    assert!(report.contains("| ops/s (× a) | create+write |"), "{report}");
    assert!(report.contains("| b | ") && !report.contains("Beside the dissertation"), "{report}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(other.path()).unwrap().count(), 0);
}

/// A tree that does not come out as the tarball has it is an error, not a
/// rate: here a tarball that holds `t/a` twice (the second copy longer), so
/// what is extracted last is not what `tar --compare` checks first.
#[test]
fn an_untarred_tree_that_differs_fails_the_run_and_still_leaves_nothing() {
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("t")).unwrap();
    let tarball = src.path().join("twice.tar");
    let tar = |op: &str| {
        let ok = Command::new("tar").arg("-C").arg(src.path()).arg(op).arg(&tarball).arg("t/a").status().unwrap();
        assert!(ok.success(), "tar {op}");
    };
    std::fs::write(src.path().join("t/a"), b"first").unwrap();
    tar("-cf");
    std::fs::write(src.path().join("t/a"), b"second, longer").unwrap();
    tar("-rf");

    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(IMCA)
        .args(["bench", "changes", "--files", "20", "--json", "--quiet", "--dir"])
        .arg(dir.path())
        .arg("--tarball")
        .arg(&tarball)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a differing tree fails the run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("differs from the tarball") && stderr.contains("t/a"), "{stderr}");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("the result is still printed");
    assert_eq!(printed["run"]["identical"], false);
    let names: Vec<&str> = printed["names"]["rows"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(names, PHASES[..5], "no rate for the untar or rm -rf of a tree that is not the tarball's");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left in --dir");
    assert!(tarball.exists(), "a named tarball is the user's");
}
