//! The `--ready-file` convention.

use anyhow::Context;
use std::path::Path;

/// Write `value` as JSON to PATH.tmp, then rename it to PATH, so a watcher
/// polling for PATH never reads a half-written file. Call it last in
/// start-up: the file's existence means every listener it names accepts.
pub fn write_ready_file(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    std::fs::write(&tmp, text).with_context(|| format!("writing ready file {}", path.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing ready file {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_whole_and_no_tmp_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.ready");
        let v = serde_json::json!({ "addr": "127.0.0.1:1", "metrics": null, "pid": 7 });
        write_ready_file(&path, &v).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"addr\": \"127.0.0.1:1\""), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only PATH remains");
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let err = write_ready_file(Path::new("/nonexistent/imca/x.ready"), &serde_json::json!({})).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/imca/x.ready"), "{err}");
    }
}
