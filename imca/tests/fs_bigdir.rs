//! A directory of 100,000 entries, created and listed through the mount.

mod common;

use common::*;
use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::AsRawFd;
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
            let fd = std::fs::File::open(&dir).unwrap();
            s.spawn(move || {
                for i in (t..ENTRIES).step_by(THREADS) {
                    let name = CString::new(format!("entry-{i:06}")).unwrap();
                    // mknodat on an open directory: no path walk from the root,
                    // just GETATTR (permission) + LOOKUP + MKNOD per entry
                    // SAFETY: valid fd and C string.
                    let r = unsafe { libc::mknodat(fd.as_raw_fd(), name.as_ptr(), libc::S_IFREG | 0o644, 0) };
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
