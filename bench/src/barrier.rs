//! A barrier between processes: the benchmark (leader) and its client
//! processes (members), one byte stream each way per member — in `imca
//! bench` the member's stdin and stdout.
//!
//! ```text
//!   member i ── "arrive\n" ──▶ leader   (waits until every member arrived,
//!   member i ◀──── "go\n" ──── leader    runs `between`, then releases all)
//!   member i ── "result {json}\n" ──▶ leader   (what the phase measured)
//! ```
//!
//! A member that dies closes its stream: the leader's barrier fails with
//! "client i exited" instead of waiting for ever, and a leader that dies
//! closes the members' input, so they fail too. `between` runs while every
//! member is parked (e.g. dropping the kernel caches before a cold phase),
//! so it can never overlap a timed phase.

use anyhow::{bail, Context};
use serde::{de::DeserializeOwned, Serialize};
use std::io::{BufRead, Write};

/// A result line larger than this is refused (members are our own
/// children, but a bug must not eat the machine's memory).
const MAX_LINE: u64 = 64 << 20;

fn read_line(r: &mut impl BufRead, who: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    let n = std::io::Read::take(&mut *r, MAX_LINE).read_line(&mut line).with_context(|| format!("reading from {who}"))?;
    if n == 0 {
        bail!("{who} exited (its stream closed)");
    }
    if !line.ends_with('\n') {
        bail!("{who} sent a line longer than {MAX_LINE} bytes or stopped mid-line");
    }
    line.pop();
    Ok(line)
}

/// The benchmark's side: one (reader, writer) per member.
pub struct Leader<R, W> {
    members: Vec<(R, W)>,
}

impl<R: BufRead, W: Write> Leader<R, W> {
    pub fn new(members: Vec<(R, W)>) -> Self {
        Leader { members }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Wait until every member arrived, then release them all.
    pub fn barrier(&mut self) -> anyhow::Result<()> {
        self.barrier_then(|| Ok(()))
    }

    /// Wait until every member arrived, run `between` (nobody is running),
    /// then release them all.
    pub fn barrier_then(&mut self, between: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
        for (i, (r, _)) in self.members.iter_mut().enumerate() {
            let line = read_line(r, &format!("client {i}"))?;
            if line != "arrive" {
                bail!("client {i}: expected `arrive` at the barrier, got {:?}", short(&line));
            }
        }
        between()?;
        for (i, (_, w)) in self.members.iter_mut().enumerate() {
            w.write_all(b"go\n").and_then(|_| w.flush()).with_context(|| format!("releasing client {i}"))?;
        }
        Ok(())
    }

    /// One result from every member, in member order.
    pub fn gather<T: DeserializeOwned>(&mut self) -> anyhow::Result<Vec<T>> {
        let mut out = Vec::with_capacity(self.members.len());
        for (i, (r, _)) in self.members.iter_mut().enumerate() {
            let line = read_line(r, &format!("client {i}"))?;
            let Some(json) = line.strip_prefix("result ") else {
                bail!("client {i}: expected a result, got {:?}", short(&line));
            };
            out.push(serde_json::from_str(json).with_context(|| format!("client {i}: result is not what was expected"))?);
        }
        Ok(out)
    }

    /// Give the streams back (to close them before waiting on the members).
    pub fn into_members(self) -> Vec<(R, W)> {
        self.members
    }
}

fn short(s: &str) -> &str {
    &s[..s.char_indices().nth(80).map(|(i, _)| i).unwrap_or(s.len())]
}

/// A client process's side.
pub struct Member<R, W> {
    r: R,
    w: W,
}

impl<R: BufRead, W: Write> Member<R, W> {
    pub fn new(r: R, w: W) -> Self {
        Member { r, w }
    }

    /// Arrive, and return once the leader released everybody.
    pub fn barrier(&mut self) -> anyhow::Result<()> {
        self.w.write_all(b"arrive\n")?;
        self.w.flush()?;
        let line = read_line(&mut self.r, "the benchmark")?;
        if line != "go" {
            bail!("expected `go` from the benchmark, got {:?}", short(&line));
        }
        Ok(())
    }

    /// Send what this phase measured.
    pub fn send<T: Serialize>(&mut self, v: &T) -> anyhow::Result<()> {
        let mut line = b"result ".to_vec();
        serde_json::to_writer(&mut line, v)?;
        line.push(b'\n');
        self.w.write_all(&line)?;
        self.w.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::time::Duration;

    type Stream = (BufReader<UnixStream>, UnixStream);

    fn split(s: UnixStream) -> Stream {
        (BufReader::new(s.try_clone().unwrap()), s)
    }

    /// Appends one line per event to a shared log; `O_APPEND` makes each
    /// write land whole and in the order the kernel saw them, across
    /// processes.
    fn log(path: &std::path::Path, line: &str) {
        let mut f = std::fs::OpenOptions::new().append(true).create(true).open(path).unwrap();
        f.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    /// What a member does in these tests: `rounds` barriers, arriving late
    /// by an amount that differs per member and round, logging each
    /// arrival and each release; then reports its index.
    fn member_work(mut m: Member<BufReader<UnixStream>, UnixStream>, i: usize, rounds: usize, log_path: &std::path::Path) {
        for k in 0..rounds {
            std::thread::sleep(Duration::from_millis(((i * 7 + k * 3) % 5) as u64 * 4));
            log(log_path, &format!("arrive {i} {k}"));
            m.barrier().unwrap();
            log(log_path, &format!("pass {i} {k}"));
        }
        m.send(&i).unwrap();
    }

    /// Every member's arrival at round k is logged before any member's
    /// release from round k, and every member arrived at every round.
    fn check_log(path: &std::path::Path, members: usize, rounds: usize) {
        let text = std::fs::read_to_string(path).unwrap();
        let events: Vec<(&str, usize, usize)> = text
            .lines()
            .map(|l| {
                let v: Vec<&str> = l.split(' ').collect();
                (v[0], v[1].parse().unwrap(), v[2].parse().unwrap())
            })
            .collect();
        for k in 0..rounds {
            let last_arrive = events.iter().rposition(|e| e.0 == "arrive" && e.2 == k).unwrap();
            let first_pass = events.iter().position(|e| e.0 == "pass" && e.2 == k).unwrap();
            assert!(last_arrive < first_pass, "round {k}: a member passed before all arrived:\n{text}");
            assert_eq!(events.iter().filter(|e| e.0 == "arrive" && e.2 == k).count(), members);
            assert_eq!(events.iter().filter(|e| e.0 == "pass" && e.2 == k).count(), members);
        }
    }

    #[test]
    fn threads_pass_together_and_results_come_in_member_order() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("log");
        let (members, rounds) = (4, 5);
        let mut leader_side = Vec::new();
        let mut handles = Vec::new();
        for i in 0..members {
            let (a, b) = UnixStream::pair().unwrap();
            leader_side.push(split(a));
            let (r, w) = split(b);
            let p = log_path.clone();
            handles.push(std::thread::spawn(move || member_work(Member::new(r, w), i, rounds, &p)));
        }
        let mut leader = Leader::new(leader_side);
        let mut betweens = 0;
        for _ in 0..rounds {
            leader.barrier_then(|| {
                betweens += 1;
                Ok(())
            })
            .unwrap();
        }
        let ids: Vec<usize> = leader.gather().unwrap();
        assert_eq!(ids, (0..members).collect::<Vec<_>>());
        assert_eq!(betweens, rounds);
        for h in handles {
            h.join().unwrap();
        }
        check_log(&log_path, members, rounds);
    }

    #[test]
    fn a_member_that_dies_fails_the_barrier_instead_of_hanging_it() {
        let (a, b) = UnixStream::pair().unwrap();
        let (c, d) = UnixStream::pair().unwrap();
        let keeper = std::thread::spawn(move || {
            let (r, w) = split(d);
            let mut m = Member::new(r, w);
            // arrives (or finds the leader already gone), then sees the
            // leader give up: an error either way, not a wait
            m.barrier().unwrap_err()
        });
        drop(b); // member 0 died before arriving
        let mut leader = Leader::new(vec![split(a), split(c)]);
        let err = leader.barrier().unwrap_err().to_string();
        assert!(err.contains("client 0 exited"), "{err}");
        drop(leader);
        // EOF, a broken pipe or a reset, depending on timing: an error, not a wait
        let _member_err = keeper.join().unwrap();
    }

    #[test]
    fn garbage_from_a_member_is_an_error() {
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"hello\n").unwrap();
        let mut leader = Leader::new(vec![split(a)]);
        let err = leader.barrier().unwrap_err().to_string();
        assert!(err.contains("expected `arrive`"), "{err}");
        b.write_all(b"result {not json\n").unwrap();
        assert!(leader.gather::<u32>().is_err());
    }

    const CHILD_ENV: &str = "IMCA_BENCH_BARRIER_TEST_CHILD";

    /// The member processes of the test below: this test binary re-run with
    /// only this test selected. Without the variable it does nothing.
    #[test]
    fn barrier_child_process() {
        let Ok(spec) = std::env::var(CHILD_ENV) else { return };
        let v: Vec<String> = spec.split('|').map(String::from).collect();
        let (sock, i, rounds, log_path) = (&v[0], v[1].parse().unwrap(), v[2].parse().unwrap(), &v[3]);
        let s = UnixStream::connect(sock).unwrap();
        let (r, w) = split(s);
        member_work(Member::new(r, w), i, rounds, std::path::Path::new(log_path));
    }

    #[test]
    fn processes_pass_together() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("sock");
        let log_path = dir.path().join("log");
        let listener = UnixListener::bind(&sock).unwrap();
        let (members, rounds) = (3, 4);
        let exe = std::env::current_exe().unwrap();
        let mut children: Vec<std::process::Child> = (0..members)
            .map(|i| {
                std::process::Command::new(&exe)
                    .args(["--exact", "barrier::tests::barrier_child_process", "--nocapture", "--test-threads=1"])
                    .env(CHILD_ENV, format!("{}|{i}|{rounds}|{}", sock.display(), log_path.display()))
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // members connect in any order; each says who it is in its result,
        // so order the streams by the pid that connected
        let mut by_pid = Vec::new();
        for _ in 0..members {
            let (s, _) = listener.accept().unwrap();
            let pid = peer_pid(&s);
            by_pid.push((children.iter().position(|c| c.id() as i32 == pid).expect("a child of ours"), s));
        }
        by_pid.sort_by_key(|(i, _)| *i);
        let mut leader = Leader::new(by_pid.into_iter().map(|(_, s)| split(s)).collect());
        for _ in 0..rounds {
            leader.barrier().unwrap();
        }
        let ids: Vec<usize> = leader.gather().unwrap();
        assert_eq!(ids, (0..members).collect::<Vec<_>>());
        for c in &mut children {
            assert!(c.wait().unwrap().success());
        }
        check_log(&log_path, members, rounds);
    }

    fn peer_pid(s: &UnixStream) -> i32 {
        use std::os::fd::AsRawFd;
        let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: a valid socket and an out-buffer of the size given.
        let rc = unsafe {
            libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, &mut cred as *mut _ as *mut _, &mut len)
        };
        assert_eq!(rc, 0);
        cred.pid
    }
}
