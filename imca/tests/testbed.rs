//! `bench/testbed`: a small testbed (2 storage servers, 1 cache node, the
//! gateway, each in its own network namespace; throttled loop disks) comes
//! up, its namespaces reach each other and nothing else, a storage
//! server's disk keeps to its IOPS bound, B1 `--quick` runs through it, and
//! nothing it built is left behind — after SIGTERM, and after a SIGKILL
//! followed by `--cleanup`. With `--gluster`, GlusterFS runs beside IMCa:
//! its bricks on throttled disks of their own in the storage namespaces, its
//! client mounted from the gateway's, and it too leaves nothing behind. With
//! `--gateways 2`, two gateways in namespaces of their own mount the same
//! volume: a file written through one is read through the other, B1's
//! clients spread over both mounts, a second testbed start is refused while
//! one runs. Needs root (as every FUSE test here).
//!
//! Testbeds share their names (`imcatb-*`) and each start removes what an
//! earlier one left, so the tests here take turns (a file lock).

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IOPS: u64 = 100;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/testbed")
}

/// The testbed script as a child; stopped (and its leftovers removed) on drop.
struct Bed {
    child: Option<Child>,
    dir: PathBuf,
}

impl Bed {
    fn start(dir: &Path, extra: &[&str]) -> (Bed, Value) {
        let _ = std::fs::remove_file(dir.join("testbed.json"));
        let child = Command::new(script())
            .args(["--imca", IMCA, "--dir"])
            .arg(dir)
            .args(["--storage", "2", "--cache", "1", "--iops", &IOPS.to_string(), "--bps", "0", "--image-mb", "64"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("testbed.out")).unwrap())
            .stderr(std::fs::File::create(dir.join("testbed.err")).unwrap())
            .spawn()
            .expect("starting bench/testbed");
        let mut bed = Bed { child: Some(child), dir: dir.to_path_buf() };
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read(dir.join("testbed.json")) {
                return (bed, serde_json::from_slice(&text).expect("testbed.json is JSON"));
            }
            if let Some(status) = bed.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("bench/testbed exited ({status}):\n{}", std::fs::read_to_string(dir.join("testbed.err")).unwrap_or_default());
            }
            assert!(start.elapsed() < START_DEADLINE, "testbed not up after {START_DEADLINE:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&mut self, sig: i32) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        c.wait().unwrap()
    }

    fn cleanup(&self) {
        let st = Command::new(script()).arg("--cleanup").arg("--dir").arg(&self.dir).status().unwrap();
        assert!(st.success(), "bench/testbed --cleanup failed");
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal(libc::SIGTERM);
        }
    }
}

/// Held for a whole test: one testbed on the machine at a time.
struct Turn {
    _lock: std::fs::File,
}

fn take_turn() -> Turn {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(script()).unwrap(); // a lock on the script itself: no file to leave behind
    // SAFETY: a valid descriptor we own; the lock goes with the file.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0, "flock");
    Turn { _lock: f }
}

fn sh(cmd: &str) -> (bool, String) {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Connect from namespace `ns` to `addr` (bash's /dev/tcp).
fn connects(ns: &str, addr: &str) -> bool {
    let (ip, port) = addr.rsplit_once(':').unwrap();
    sh(&format!("nsenter --net=/run/netns/{ns} bash -c 'exec 3<>/dev/tcp/{ip}/{port}' 2>/dev/null")).0
}

/// Nothing the testbed builds is left: namespaces, loop devices on its
/// images, mounts under its directory, blkio cgroups, daemons.
fn assert_nothing_left(dir: &Path) {
    let (_, ns) = sh("ip netns list");
    assert!(!ns.contains("imcatb-"), "namespaces left: {ns}");
    let (_, loops) = sh("losetup -a");
    assert!(!loops.contains(&*dir.to_string_lossy()), "loop devices left: {loops}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*dir.to_string_lossy()), "mounts left under {}", dir.display());
    let cgroups: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/blkio")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(!cgroups.iter().any(|c| c.starts_with("imcatb-")), "cgroups left: {cgroups:?}");
    let (_, ps) = sh(&format!("ps -eo args | grep -F '{}' | grep -v grep", dir.display()));
    assert!(ps.trim().is_empty(), "processes left:\n{ps}");
    assert!(!Path::new(LOCK).exists(), "the one-testbed lock is removed with the testbed");
}

const LOCK: &str = "/run/lock/imca-testbed.lock";

#[test]
fn testbed_is_a_cluster_of_namespaces_with_slow_disks_and_leaves_nothing_behind() {
    for (tool, pkg) in [("ip", "iproute2"), ("tc", "iproute2"), ("mkfs.ext4", "e2fsprogs"), ("losetup", "mount"), ("nsenter", "util-linux")] {
        require_tool(tool, pkg);
    }
    let _turn = take_turn();
    let tmp = tempfile::Builder::new().prefix("imcatb-test-").tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().to_path_buf();
    let (mut bed, info) = Bed::start(&dir, &[]);

    // namespaces reach each other over the bridge, and nothing outside it
    let storage: Vec<String> = info["storage_servers"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    let cache: Vec<String> = info["cache_nodes"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    assert_eq!((storage.len(), cache.len()), (2, 1));
    for a in storage.iter().chain(&cache) {
        assert!(connects("imcatb-g", a), "gateway namespace reaches {a}");
    }
    assert!(connects("imcatb-s0", &cache[0]), "a storage server reaches the cache node");
    let (_, routes) = sh("ip -n imcatb-g route");
    assert_eq!(routes.trim().lines().count(), 1, "only the testbed's own subnet: {routes}");
    assert!(!connects("imcatb-g", "10.213.78.1:7000"), "no way out of the testbed");
    assert!(info["network"].as_str().unwrap().contains("no loopback"), "says which latencies are real: {info}");

    // the disk bound holds: O_DIRECT 4 KiB reads from storage-0's cgroup
    // (an upper bound: a slow machine only makes it lower)
    let export = dir.join("exports/s0");
    let (ok, out) = sh(&format!("dd if=/dev/urandom of={}/probe bs=1M count=2 oflag=direct status=none", export.display()));
    assert!(ok, "{out}");
    let reads = 3 * IOPS;
    let t = Instant::now();
    let (ok, out) = sh(&format!(
        "echo $$ > /sys/fs/cgroup/blkio/imcatb-s0/cgroup.procs && dd if={}/probe of=/dev/null bs=4k count={reads} iflag=direct status=none",
        export.display()
    ));
    assert!(ok, "{out}");
    let iops = reads as f64 / t.elapsed().as_secs_f64();
    assert!(iops <= IOPS as f64 * 1.3, "{iops:.0} reads/s from a disk bounded to {IOPS}");
    std::fs::remove_file(export.join("probe")).unwrap();

    // B1 --quick through the testbed's mount
    let mnt = info["mount"].as_str().unwrap();
    let out = Command::new(IMCA)
        .args(["bench", "stat", "--quick", "--files", "200", "--clients", "1,2", "--json", "--quiet", "--dir", mnt])
        .output()
        .unwrap();
    assert!(out.status.success(), "B1: {}", String::from_utf8_lossy(&out.stderr));
    let b1: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b1["rows"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_dir(dir.join("exports/s0")).unwrap().count() > 1, "files reached storage-0's disk");

    // SIGTERM: everything removed
    bed.signal(libc::SIGTERM);
    assert_nothing_left(&dir);

    // a crash (SIGKILL: the daemons stay) is cleaned up by --cleanup
    let (mut bed, _) = Bed::start(&dir, &[]);
    bed.signal(libc::SIGKILL);
    let (_, ns) = sh("ip netns list");
    assert!(ns.contains("imcatb-g"), "a killed testbed leaves its namespaces: {ns}");
    bed.cleanup();
    assert_nothing_left(&dir);
}

#[test]
fn testbed_runs_glusterfs_beside_imca_on_disks_bounded_alike_and_leaves_nothing_behind() {
    for (tool, pkg) in [("ip", "iproute2"), ("mkfs.ext4", "e2fsprogs"), ("nsenter", "util-linux")] {
        require_tool(tool, pkg);
    }
    for tool in ["glusterfsd", "glusterfs"] {
        require_tool(tool, "glusterfs-client");
    }
    let _turn = take_turn();
    let tmp = tempfile::Builder::new().prefix("imcatb-test-").tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().to_path_buf();
    let (mut bed, info) = Bed::start(&dir, &["--gluster"]);
    let g = &info["gluster"];
    let gmnt = PathBuf::from(g["mount"].as_str().expect("testbed.json names the GlusterFS mount"));
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        mounts.lines().any(|l| l.contains(&format!(" {} ", gmnt.display())) && l.contains("fuse.glusterfs")),
        "GlusterFS mounted at {}",
        gmnt.display()
    );

    // the bricks listen in the storage namespaces, reached from the gateway's
    let bricks: Vec<String> = g["bricks"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    assert_eq!(bricks.len(), 2);
    for (i, b) in bricks.iter().enumerate() {
        let addr = b.rsplitn(2, ':').nth(1).unwrap();
        assert!(addr.starts_with(&format!("10.213.77.{}:", 10 + i)), "brick {i} in storage namespace {i}: {b}");
        assert!(connects("imcatb-g", addr), "the gateway namespace reaches brick {addr}");
    }

    // files are distributed over both bricks' own disks, not IMCa's
    for i in 0..16 {
        std::fs::write(gmnt.join(format!("f{i}")), b"hello").unwrap();
    }
    for i in 0..2 {
        let n = std::fs::read_dir(dir.join(format!("exports/gs{i}/brick"))).unwrap().filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with('f')).count();
        assert!(n > 0, "brick {i} holds some of the files");
    }
    assert!(!dir.join("exports/s0/f0").exists() && !dir.join("exports/s1/f0").exists(), "IMCa's disks hold none");

    // unaligned O_DIRECT works (remote-dio), so the latency benchmarks bypass the client's caches here too
    let (ok, out) = sh(&format!("dd if=/dev/zero of={}/direct bs=3 count=1 oflag=direct status=none", gmnt.display()));
    assert!(ok, "unaligned O_DIRECT write: {out}");

    // each brick runs in a blkio cgroup with the same bounds as IMCa's servers, on its own loop device
    for i in 0..2 {
        let cg = format!("/sys/fs/cgroup/blkio/imcatb-gs{i}");
        let bound = std::fs::read_to_string(format!("{cg}/blkio.throttle.read_iops_device")).unwrap();
        let imca = std::fs::read_to_string(format!("/sys/fs/cgroup/blkio/imcatb-s{i}/blkio.throttle.read_iops_device")).unwrap();
        assert!(bound.trim().ends_with(&format!(" {IOPS}")) && imca.trim().ends_with(&format!(" {IOPS}")), "{bound} / {imca}");
        assert_ne!(bound.split(' ').next(), imca.split(' ').next(), "a disk of its own");
        let procs = std::fs::read_to_string(format!("{cg}/cgroup.procs")).unwrap();
        assert!(
            procs.lines().any(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"glusterfsd"))),
            "brick {i} runs in {cg}"
        );
    }

    // SIGTERM: GlusterFS goes with the rest
    bed.signal(libc::SIGTERM);
    assert_nothing_left(&dir); // the bricks' and the client's command lines name the directory

    // a crash leaves the bricks and the client running; --cleanup removes them
    let (mut bed, _) = Bed::start(&dir, &["--gluster"]);
    bed.signal(libc::SIGKILL);
    bed.cleanup();
    assert_nothing_left(&dir);
}

#[test]
fn testbed_with_two_gateways_shares_one_volume_between_their_mounts() {
    for (tool, pkg) in [("ip", "iproute2"), ("mkfs.ext4", "e2fsprogs"), ("nsenter", "util-linux"), ("flock", "util-linux")] {
        require_tool(tool, pkg);
    }
    let _turn = take_turn();
    let tmp = tempfile::Builder::new().prefix("imcatb-test-").tempdir_in("/var/tmp").unwrap();
    let dir = tmp.path().to_path_buf();
    let (mut bed, info) = Bed::start(&dir, &["--gateways", "2"]);
    let mounts: Vec<PathBuf> = info["mounts"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().into()).collect();
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[0], Path::new(info["mount"].as_str().unwrap()), "the first gateway's mount is still \"mount\"");
    assert_eq!(info["gateway_namespaces"], serde_json::json!(["imcatb-g", "imcatb-g1"]));
    assert!(connects("imcatb-g1", info["storage_servers"][0].as_str().unwrap()), "the second gateway reaches storage");

    // one volume: written through gateway 0, read (and removed) through gateway 1
    std::fs::write(mounts[0].join("shared"), b"through g0").unwrap();
    assert_eq!(std::fs::read(mounts[1].join("shared")).unwrap(), b"through g0");
    std::fs::remove_file(mounts[1].join("shared")).unwrap();

    // a second testbed is refused while this one runs, and this one is untouched
    let other = tmp.path().join("other");
    let out = Command::new(script()).args(["--imca", IMCA, "--dir"]).arg(&other).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("another bench/testbed is running"));
    assert!(!other.exists(), "the refused start made nothing");
    let out = Command::new(script()).arg("--cleanup").arg("--dir").arg(&other).output().unwrap();
    assert!(!out.status.success(), "--cleanup refuses too");
    assert!(std::fs::read_dir(&mounts[1]).is_ok(), "the running testbed is still mounted");

    // B1 --quick with its clients spread over both mounts (files made through the first)
    let out = Command::new(IMCA)
        .args(["bench", "stat", "--quick", "--files", "200", "--clients", "1,2", "--json", "--quiet", "--dir"])
        .arg(&mounts[0])
        .arg("--other-dirs")
        .arg(&mounts[1])
        .output()
        .unwrap();
    assert!(out.status.success(), "B1: {}", String::from_utf8_lossy(&out.stderr));
    let b1: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b1["rows"].as_array().unwrap().len(), 2);
    assert_eq!(b1["run"]["mounts"], 2, "the result says its clients used two mounts");

    bed.signal(libc::SIGTERM);
    assert_nothing_left(&dir);
}
