//! The `--ready-file` convention: write PATH.tmp, then rename it to PATH, so
//! a watcher never sees a half-written file.

use anyhow::Context;
use std::path::Path;

pub fn write_ready_file(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
