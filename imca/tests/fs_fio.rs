//! fio writes random blocks with crc32c checksums through one gateway, then a
//! second gateway verifies every block.

mod common;

use common::*;
use std::process::Command;

fn fio(dir: &std::path::Path, extra: &[&str]) {
    let out = Command::new("fio")
        .args([
            "--name=imca",
            "--rw=randwrite",
            "--bsrange=4k-256k",
            "--size=48M",
            "--numjobs=2",
            "--ioengine=psync",
            "--verify=crc32c",
            "--randrepeat=1",
            "--group_reporting",
        ])
        .arg(format!("--directory={}", dir.display()))
        // fio drops verify-state files in its working directory
        .current_dir(dir)
        .args(extra)
        .output()
        .expect("running fio");
    assert!(
        out.status.success(),
        "fio {extra:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fio_random_writes_verify() {
    require_tool("fio", "fio");
    let c = ClusterSpec::new().gateways(2).start();
    // write and verify in one run, through gateway 0
    fio(c.mount(), &["--do_verify=1"]);
    // verify only, through gateway 1 (a cold kernel cache on another mount)
    fio(&c.gateways[1].mount, &["--verify_only"]);
}
