//! A small tmpfs for tests that fill a file system (needs root).

use std::path::{Path, PathBuf};

/// A tmpfs of `size` (e.g. "1m"), mounted for a test and unmounted on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},nr_inodes=1000"), "imca-test"])
            .arg(dir)
            .status()
            .expect("running mount(8)");
        assert!(st.success(), "mounting a test tmpfs failed (this test needs root)");
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
