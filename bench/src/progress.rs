//! A progress line on stderr for long phases: rewritten in place on a
//! terminal, one line per step otherwise (logs stay readable). stdout
//! carries only results, and a client process's stdout is its barrier
//! stream, so progress never goes there.

use std::io::{IsTerminal, Write};
use std::time::Instant;

pub struct Progress {
    what: String,
    start: Instant,
    tty: bool,
    quiet: bool,
}

impl Progress {
    /// `quiet`: say nothing (`--json` runs inside scripts may want that too).
    pub fn new(what: impl Into<String>, quiet: bool) -> Progress {
        Progress { what: what.into(), start: Instant::now(), tty: std::io::stderr().is_terminal(), quiet }
    }

    /// Step `i` of `n`: `msg`.
    pub fn step(&self, i: usize, n: usize, msg: &str) {
        if self.quiet {
            return;
        }
        let line = format!("{}: {i}/{n} {msg} ({:.1} s)", self.what, self.start.elapsed().as_secs_f64());
        let mut e = std::io::stderr().lock();
        let _ = if self.tty { write!(e, "\r{line}\x1b[K") } else { writeln!(e, "{line}") };
    }

    pub fn done(&self) {
        if self.quiet {
            return;
        }
        let mut e = std::io::stderr().lock();
        let line = format!("{}: done in {:.1} s", self.what, self.start.elapsed().as_secs_f64());
        let _ = if self.tty { writeln!(e, "\r{line}\x1b[K") } else { writeln!(e, "{line}") };
    }
}
