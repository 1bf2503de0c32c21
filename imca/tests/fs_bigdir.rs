//! A directory of 100,000 entries, created and listed through the mount.

mod common;

use common::*;
use std::collections::HashSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

const ENTRIES: usize = 100_000;
const THREADS: usize = 16;

#[test]
fn hundred_thousand_entries() {
    let c = ClusterSpec::new().start();
    let dir = c.path("big");
    std::fs::create_dir(&dir).unwrap();

    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let dir = dir.clone();
            s.spawn(move || {
                for i in (t..ENTRIES).step_by(THREADS) {
                    let p = CString::new(dir.join(format!("entry-{i:06}")).as_os_str().as_bytes()).unwrap();
                    // mknod: one LOOKUP + one MKNOD, the cheapest way to make a file
                    // SAFETY: valid C string.
                    let r = unsafe { libc::mknod(p.as_ptr(), libc::S_IFREG | 0o644, 0) };
                    assert_eq!(r, 0, "mknod entry-{i}: {}", std::io::Error::last_os_error());
                }
            });
        }
    });
    let created = start.elapsed();

    let start = Instant::now();
    let mut seen = HashSet::with_capacity(ENTRIES);
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(seen.insert(name.clone()), "{name} listed twice");
    }
    let listed = start.elapsed();
    assert_eq!(seen.len(), ENTRIES);
    for i in (0..ENTRIES).step_by(9973) {
        assert!(seen.contains(&format!("entry-{i:06}")));
        assert!(std::fs::metadata(dir.join(format!("entry-{i:06}"))).unwrap().is_file());
    }
    eprintln!("created {ENTRIES} entries in {created:?} ({:.0}/s), listed in {listed:?}", ENTRIES as f64 / created.as_secs_f64());
}
