//! Which worker thread a new connection is dealt to.
//!
//! memcached deals connections round-robin. Here a TCP connection goes to a
//! worker of the CPU its packets arrived on (`SO_INCOMING_CPU`), so that
//! the connections a client opened from one CPU share one worker:
//!
//! ```text
//!  client thread A (on CPU 0) ── its connections ──> worker 0
//!  client thread B (on CPU 1) ── its connections ──> worker 1
//! ```
//!
//! Why (issue 14, docs/benchmarks/archive/cache-node-vs-memcached.md): with round-robin, every worker
//! serves connections of every client thread, so a reply often wakes a
//! client thread sleeping on the other CPU, and a request a worker there;
//! a cross-CPU wake-up is an inter-processor interrupt, which on a VM is a
//! trip through the hypervisor. When a client thread talks to one worker
//! only, the scheduler keeps the two on one CPU (each wakes the other) and
//! every wake-up is local: on the 2-CPU test VM, memaslap's 90/10 load at
//! 16 connections ran at ~1.4× the round-robin rate with ~0.7× the server
//! CPU per op. Round-robin got there only when the accept order happened to
//! deal each client thread's connections to one worker.
//!
//! For a client on another host the incoming CPU is the one that took the
//! NIC's interrupt; grouping by it costs nothing there. Where one CPU takes
//! every connection's packets (a single-queue NIC without RPS), the
//! grouping would pile everything onto one worker, so it yields to balance:
//! a worker is skipped once it holds [`slack`] more live connections than
//! the least busy one. UNIX sockets carry no incoming CPU and go
//! round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The workers' live connection counts, shared by the acceptor (which
/// deals) and the workers (which count their connections' ends).
pub struct Placement {
    live: Box<[AtomicUsize]>,
    /// CPUs the node may run on: the incoming CPU picks a group of workers
    cpus: usize,
    /// the round-robin cursor (connections with no incoming CPU)
    next: AtomicUsize,
}

/// How many more live connections than the least busy worker a worker may
/// hold and still take its CPU's connections: enough for a client thread's
/// burst of connects (memaslap opens 8 per thread at 16 connections, often
/// all before the other thread's), and a sixteenth of all connections,
/// so a node where one CPU sees every connection stays within ~6 % of even.
fn slack(total: usize) -> usize {
    8 + total / 16
}

impl Placement {
    pub fn new(workers: usize, cpus: usize) -> Placement {
        Placement { live: (0..workers.max(1)).map(|_| AtomicUsize::new(0)).collect(), cpus: cpus.max(1), next: AtomicUsize::new(0) }
    }

    /// The worker for a new connection whose packets arrive on
    /// `incoming_cpu`; counted as live there until [`closed`](Self::closed).
    pub fn pick(&self, incoming_cpu: Option<usize>) -> usize {
        let n = self.live.len();
        let count = |w: usize| self.live[w].load(Ordering::Relaxed);
        let rr = self.next.fetch_add(1, Ordering::Relaxed);
        // the least busy worker, ties broken round-robin so an idle node spreads
        let least = (0..n).map(|i| (rr + i) % n).min_by_key(|&w| count(w)).unwrap_or(0);
        let w = match incoming_cpu {
            None => rr % n,
            Some(cpu) => {
                // more workers than CPUs: the CPU's workers are every cpus-th one
                let first = if n > self.cpus { cpu % self.cpus } else { cpu % n };
                let total: usize = (0..n).map(count).sum();
                let room = count(least) + slack(total);
                // the first of them with room, not the least busy: a client
                // thread's connections then share one worker with `-t` above
                // the CPU count too (with memcached's default -t 4 on 2 CPUs,
                // spreading them over two workers kept every pair apart)
                (first..n).step_by(self.cpus.min(n).max(1)).find(|&w| count(w) <= room).unwrap_or(least)
            }
        };
        self.live[w].fetch_add(1, Ordering::Relaxed);
        w
    }

    /// A connection dealt to `worker` has ended (or never reached it).
    pub fn closed(&self, worker: usize) {
        self.live[worker].fetch_sub(1, Ordering::Relaxed);
    }

    /// [`pick`](Self::pick), with the count given back when the returned
    /// token is dropped (it travels with the connection).
    pub fn deal(self: &Arc<Self>, incoming_cpu: Option<usize>) -> Live {
        Live { worker: self.pick(incoming_cpu), place: self.clone() }
    }
}

/// A connection counted live on its worker until this is dropped.
pub struct Live {
    pub worker: usize,
    place: Arc<Placement>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.place.closed(self.worker);
    }
}

/// The CPU a TCP socket's last packet was processed on, if the kernel says.
pub fn incoming_cpu(fd: i32) -> Option<usize> {
    let mut cpu: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cpu`, an int it owns.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_INCOMING_CPU, (&mut cpu as *mut libc::c_int).cast(), &mut len) };
    (r == 0 && cpu >= 0).then_some(cpu as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpus_connections_share_a_worker() {
        let p = Placement::new(2, 2);
        // one client thread connects 8 times from CPU 0, then another 8 from CPU 1
        let a: Vec<usize> = (0..8).map(|_| p.pick(Some(0))).collect();
        let b: Vec<usize> = (0..8).map(|_| p.pick(Some(1))).collect();
        assert!(a.iter().all(|&w| w == a[0]), "{a:?}");
        assert!(b.iter().all(|&w| w == b[0]) && b[0] != a[0], "{b:?}");
    }

    #[test]
    fn one_cpu_for_everything_stays_near_balanced() {
        let p = Placement::new(4, 4);
        for _ in 0..1000 {
            p.pick(Some(2));
        }
        let live: Vec<usize> = p.live.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let (lo, hi) = (*live.iter().min().unwrap(), *live.iter().max().unwrap());
        assert!(hi - lo <= slack(1000) + 1, "{live:?}");
        assert!(hi > lo, "the CPU's own worker is preferred: {live:?}");
    }

    #[test]
    fn more_workers_than_cpus_fill_the_cpus_first_worker_then_the_next() {
        let p = Placement::new(4, 2);
        let mut seen = [0; 4];
        for i in 0..16 {
            seen[p.pick(Some(i % 2))] += 1;
        }
        assert_eq!(seen, [8, 8, 0, 0]);
        // one CPU's connections: its first worker up to the slack, then its next
        let p = Placement::new(4, 2);
        let w: Vec<usize> = (0..12).map(|_| p.pick(Some(1))).collect();
        assert!(w[..9].iter().all(|&x| x == 1), "{w:?}");
        assert!(w[9..].iter().all(|&x| x == 3), "{w:?}");
        // and every worker is used once the slack is spent
        for _ in 0..100 {
            p.pick(Some(1));
        }
        assert!(p.live.iter().all(|c| c.load(Ordering::Relaxed) > 0));
    }

    #[test]
    fn no_incoming_cpu_is_round_robin_and_closed_frees() {
        let p = Placement::new(3, 8);
        let w: Vec<usize> = (0..6).map(|_| p.pick(None)).collect();
        assert_eq!(w, [0, 1, 2, 0, 1, 2]);
        for &x in &w {
            p.closed(x);
        }
        assert!(p.live.iter().all(|c| c.load(Ordering::Relaxed) == 0));
        let p = Arc::new(p);
        let live = p.deal(Some(4));
        assert_eq!(p.live[live.worker].load(Ordering::Relaxed), 1);
        drop(live);
        assert!(p.live.iter().all(|c| c.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn more_cpus_than_workers_fold_onto_them() {
        let p = Placement::new(2, 8);
        assert_eq!(p.pick(Some(5)), 1);
        assert_eq!(p.pick(Some(6)), 0);
    }

    #[test]
    fn a_tcp_socket_reports_its_incoming_cpu() {
        use std::os::fd::AsRawFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        // SAFETY: sysconf only reads a system value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) } as usize;
        // Linux has said since 3.19; a kernel (or sandbox) that does not
        // leaves the node dealing round-robin, which the tests above cover
        if let Some(cpu) = incoming_cpu(s.as_raw_fd()) {
            assert!(cpu < cpus, "{cpu} of {cpus}");
        }
    }
}
