//! The systemd units in deploy/ are valid (systemd-analyze verify, with the
//! binary under test in place of /usr/local/bin/imca), and the flags they pass
//! are ones the subcommands accept (each ExecStart's flags parsed by `--help`
//! of that subcommand).

use std::path::Path;
use std::process::Command;

const IMCA: &str = env!("CARGO_BIN_EXE_imca");

fn units() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".service"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap()))
        .collect();
    out.sort();
    out
}

#[test]
fn units_verify_with_systemd_analyze() {
    let Ok(sa) = which("systemd-analyze") else {
        panic!("this test needs systemd-analyze (apt-get install systemd)");
    };
    let units = units();
    assert_eq!(units.len(), 3, "{:?}", units.iter().map(|u| &u.0).collect::<Vec<_>>());
    let tmp = tempfile::tempdir().unwrap();
    for (name, text) in &units {
        let text = text.replace("/usr/local/bin/imca", IMCA);
        // Template units are verified through an instance.
        let file = if name.ends_with("@.service") { name.replace("@.service", "@5211.service") } else { name.clone() };
        std::fs::write(tmp.path().join(&file), text).unwrap();
        let out = Command::new(&sa).args(["verify", "--man=no"]).arg(tmp.path().join(&file)).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        // Only complaints about our unit count (not the host's other units).
        let ours: Vec<&str> = err.lines().filter(|l| l.contains(&file) || l.contains(name.as_str())).collect();
        assert!(ours.is_empty(), "{file}: {}", ours.join("\n"));
    }
}

#[test]
fn exec_start_flags_exist() {
    for (name, text) in units() {
        let exec = text.lines().find(|l| l.starts_with("ExecStart=")).unwrap_or_else(|| panic!("{name}: no ExecStart"));
        let words: Vec<&str> = exec.trim_start_matches("ExecStart=").split_whitespace().collect();
        assert_eq!(words[0], "/usr/local/bin/imca");
        let sub = words[1];
        let help = Command::new(IMCA).args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        for w in &words[2..] {
            if w.starts_with("--") {
                assert!(help.contains(w), "{name}: `imca {sub}` has no flag {w}");
            } else if w.len() == 2 && w.starts_with('-') {
                assert!(help.contains(&format!("{w},")) || help.contains(&format!("{w} ")), "{name}: `imca {sub}` has no flag {w}");
            }
        }
    }
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join(tool)).find(|p| p.is_file()))
        .ok_or(())
}
