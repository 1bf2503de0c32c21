//! The change benchmark's untar: the system's `tar -xf` (a child process,
//! timed from start to exit) into a directory of the target, then `tar
//! --compare` of what landed there against the tarball. An untar that lost
//! or broke a file is an error in the result, not a rate; whether mtimes
//! and modes/owners were kept is reported apart (bindfs does not keep
//! mtimes, and a file system may map owners), as `bench/scripts/untar.sh`
//! does.

use anyhow::{bail, Context};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// What `tar` said about the extracted tree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// names, types, sizes, contents and link targets all match
    pub identical: bool,
    pub mtimes_kept: bool,
    /// permission bits, owner and group
    pub modes_kept: bool,
    /// the first few lines that made it not identical
    pub differences: Vec<String>,
}

/// Lines of a differing tree kept in the result (the rest only counted).
const SHOWN: usize = 5;

/// Extract `tarball` into `dir` (which exists); seconds, and what `tar`
/// wrote on stderr (complaints the comparison judges with the rest).
pub fn extract(tarball: &Path, dir: &Path) -> anyhow::Result<(f64, String)> {
    let t = Instant::now();
    let out = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .arg("-xf")
        .arg(tarball)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running tar -xf (is GNU tar installed?)")?;
    let secs = t.elapsed().as_secs_f64();
    // exit 2 is "fatal" (tar could not go on) unless it only listed
    // per-file complaints, which the comparison reads
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && stderr.trim().is_empty() {
        bail!("tar -xf {} into {}: {}", tarball.display(), dir.display(), out.status);
    }
    Ok((secs, stderr))
}

/// Compare the tree in `dir` with `tarball`; `extract_stderr` is what the
/// extraction said (a file it could not make shows up in both).
pub fn compare(tarball: &Path, dir: &Path, extract_stderr: &str) -> anyhow::Result<Comparison> {
    let out = Command::new("tar")
        .arg("-C")
        .arg(dir)
        .arg("--compare")
        .arg("-f")
        .arg(tarball)
        .stdin(Stdio::null())
        .output()
        .context("running tar --compare")?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let said = format!("{extract_stderr}\n{stdout}\n{stderr}");
    let c = judge(&said);
    // exit 1 is "some files differ": then something must have said which
    if !out.status.success() && c.identical && c.mtimes_kept && c.modes_kept {
        bail!("tar --compare -f {} in {}: {} and no difference named", tarball.display(), dir.display(), out.status);
    }
    Ok(c)
}

/// Sort `tar`'s lines (GNU tar 1.34 wording): a differing mtime, or a mode
/// or owner tar could not set or finds different, is reported apart;
/// anything else about a file is a difference; tar's closing summary is
/// neither.
pub fn judge(said: &str) -> Comparison {
    let mut c = Comparison { identical: true, mtimes_kept: true, modes_kept: true, differences: Vec::new() };
    let mut more = 0;
    for line in said.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("Mod time differs") || line.contains("Cannot utime") {
            c.mtimes_kept = false;
        } else if ["Mode differs", "Uid differs", "Gid differs", "Cannot change mode", "Cannot change ownership"]
            .iter()
            .any(|m| line.contains(m))
        {
            c.modes_kept = false;
        } else if line.starts_with("tar: Exiting with failure status") {
        } else {
            c.identical = false;
            if c.differences.len() < SHOWN {
                c.differences.push(line.to_string());
            } else {
                more += 1;
            }
        }
    }
    if more > 0 {
        c.differences.push(format!("… and {more} more"));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtimes_and_modes_are_apart_from_differences() {
        let c = judge("a/b.rs: Mod time differs\n\ntar: a/c: Cannot utime: Operation not permitted\n");
        assert_eq!((c.identical, c.mtimes_kept, c.modes_kept), (true, false, true));
        let c = judge("a/b.rs: Mode differs\na/b.rs: Uid differs\ntar: Exiting with failure status due to previous errors\n");
        assert_eq!((c.identical, c.mtimes_kept, c.modes_kept), (true, true, false));
        assert!(c.differences.is_empty());
        assert_eq!(judge(""), Comparison { identical: true, mtimes_kept: true, modes_kept: true, differences: vec![] });
    }

    #[test]
    fn a_lost_or_broken_file_is_a_difference_and_a_few_are_shown() {
        let c = judge("a/b.rs: Size differs\na/b.rs: Mod time differs\ntar: a/c.rs: Warning: Cannot stat: No such file or directory\n");
        assert!(!c.identical && !c.mtimes_kept);
        assert_eq!(c.differences, ["a/b.rs: Size differs", "tar: a/c.rs: Warning: Cannot stat: No such file or directory"]);
        let many: String = (0..9).map(|i| format!("f{i}: Contents differ\n")).collect();
        let c = judge(&many);
        assert_eq!(c.differences.len(), SHOWN + 1);
        assert_eq!(c.differences.last().unwrap(), "… and 4 more");
    }

    #[test]
    fn a_tree_extracted_and_then_broken_is_caught() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("t/deep")).unwrap();
        std::fs::write(src.join("t/deep/a"), b"hello").unwrap();
        std::fs::write(src.join("t/b"), b"world").unwrap();
        let tar = d.path().join("t.tar");
        assert!(Command::new("tar").arg("-C").arg(&src).arg("-cf").arg(&tar).arg("t").status().unwrap().success());
        let into = d.path().join("into");
        std::fs::create_dir(&into).unwrap();
        let (secs, said) = extract(&tar, &into).unwrap();
        assert!(secs > 0.0 && said.is_empty(), "{said}");
        let c = compare(&tar, &into, &said).unwrap();
        assert!(c.identical && c.mtimes_kept && c.modes_kept, "{c:?}");
        // an old mtime is kept apart from the contents
        assert!(Command::new("touch").args(["-d", "2000-01-01"]).arg(into.join("t/deep/a")).status().unwrap().success());
        let c = compare(&tar, &into, "").unwrap();
        assert!(c.identical && !c.mtimes_kept, "{c:?}");
        std::fs::write(into.join("t/b"), b"wOrld").unwrap(); // same size
        std::fs::remove_file(into.join("t/deep/a")).unwrap();
        let c = compare(&tar, &into, "").unwrap();
        assert!(!c.identical, "{c:?}");
        assert!(c.differences.iter().any(|l| l.contains("t/b: Contents differ")), "{c:?}");
        assert!(c.differences.iter().any(|l| l.contains("t/deep/a")), "{c:?}");
    }
}
