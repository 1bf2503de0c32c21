#!/usr/bin/env python3
"""CPU per small file written, in every process of a cluster.

Writes 2,000 files of 1 KiB (create, write, close each) into a new
directory of DIR, and prints files/s, the writing thread's CPU per file,
each named process's CPU per file (the sum over its threads of
/proc/PID/task/*/schedstat) and how busy the machine was.

usage: write-cpu.py DIR NAME=PID [NAME=PID ...]
e.g.   write-cpu.py /mnt/imca gateway=$(pgrep -f 'imca mount .*/mnt/imca$') s0=... idle=...
"""
import os
import sys
import time

from procstat import cpu_ns


def machine():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v[:3]) + sum(v[5:8]), v[3]


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    d = sys.argv[1]
    pids = dict(p.split("=", 1) for p in sys.argv[2:])
    before = {k: cpu_ns(p) for k, p in pids.items()}
    s0, (b0, i0) = time.thread_time_ns(), machine()
    dd = os.path.join(d, f"wc-{time.time_ns()}")
    os.makedirs(dd)
    t = time.perf_counter()
    for i in range(2000):
        with open(os.path.join(dd, f"f{i}"), "wb") as f:
            f.write(b"x" * 1024)
    elapsed = time.perf_counter() - t
    after = {k: cpu_ns(p) for k, p in pids.items()}
    s1, (b1, i1) = time.thread_time_ns(), machine()
    per = " ".join(f"{k} {(after[k] - before[k]) / 2000 / 1000:.0f}" for k in pids)
    busy = (b1 - b0) / max(1, (b1 - b0) + (i1 - i0)) * 100
    print(f"{2000 / elapsed:.0f} files/s; µs CPU per file: process {(s1 - s0) / 2000 / 1000:.0f} {per}; machine busy {busy:.0f}%")


main()
