//! fsx, the File System eXerciser (asomers' Rust port of FreeBSD's, from
//! crates.io; `./dev deps` installs it), against the mounted volume with
//! every operation it knows turned on: reads and writes, mapped reads and
//! writes, truncates, fsync and fdatasync, posix_fallocate, punch hole,
//! sendfile, posix_fadvise, copy_file_range, closing and reopening, and
//! cache invalidation. Each read is checked against fsx's own model of the
//! file. Written by someone else, it knows nothing of IMCa's layout, and
//! it checks what a program sees of all those operations together.

mod common;

use common::*;
use std::process::Command;

/// Every operation, a file of up to 1 MiB (eight stripe units of 128 KiB
/// over two servers), operations up to 256 KiB at any alignment.
const CONFIG: &str = r#"
flen = 1048576
[opsize]
max = 262144
min = 0
align = 1
[weights]
close_open = 1
invalidate = 1
read = 10
write = 10
mapread = 5
mapwrite = 5
truncate = 5
fsync = 1
fdatasync = 1
posix_fallocate = 3
punch_hole = 3
sendfile = 2
posix_fadvise = 1
copy_file_range = 3
"#;

fn fsx(c: &Cluster, gateway: usize, name: &str, seed: u32, ops: u32) {
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("fsx.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let out = Command::new("fsx")
        .arg("-f")
        .arg(&config)
        .args(["-N", &ops.to_string(), "-S", &seed.to_string(), "-P"])
        .arg(work.path())
        .arg(c.path_at(gateway, name))
        .output()
        .expect("run fsx");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && text.contains("All operations completed A-OK!"),
        "fsx -S {seed} on {name} through gateway {gateway} failed ({}):\n{}",
        out.status,
        text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

/// With a bank: every block read may come from it, every change must fix
/// it first.
#[test]
fn fsx_with_every_operation_is_clean_with_a_bank() {
    require_tool("fsx", "fsx (cargo install fsx)");
    let c = ClusterSpec::new().cache(Cache::Imca(2)).start();
    for seed in [1, 2] {
        fsx(&c, 0, &format!("f{seed}"), seed, 4000);
    }
}

/// Two gateways: fsx runs through one while the other holds the file in
/// its kernel's cache (read between the runs); after each run the other
/// gateway reads exactly what fsx last wrote.
#[test]
fn fsx_through_one_gateway_is_seen_whole_through_the_other() {
    require_tool("fsx", "fsx (cargo install fsx)");
    let c = ClusterSpec::new().gateways(2).start();
    for (round, seed) in [3, 4].into_iter().enumerate() {
        fsx(&c, round % 2, "shared", seed, 3000);
        let (here, there) = (std::fs::read(c.path_at(round % 2, "shared")).unwrap(), std::fs::read(c.path_at(1 - round % 2, "shared")).unwrap());
        assert!(here == there, "round {round}: the other gateway reads {} bytes, fsx's left {}", there.len(), here.len());
    }
}
