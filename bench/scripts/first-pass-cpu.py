#!/usr/bin/env python3
"""The first stat pass over files just written, with the CPU each side spends.

For each target (NAME=DIR=PID: a mount, and the pid of the daemon serving it)
and each of ROUNDS rounds, alternated: 4,000 files of 1 KiB are written
through the mount, 2 s pass (every TTL runs out), then one stat of each.
Prints per round the stats/s, the stat-ing thread's CPU per stat (its CPU
clock) and the daemon's (the sum over its threads of /proc/PID/task/*/schedstat).

usage (root): first-pass-cpu.py ROUNDS NAME=DIR=PID [NAME=DIR=PID ...]
e.g.  first-pass-cpu.py 5 bindfs=/mnt/b=$(pgrep -f 'bindfs /src') imca=/mnt/i=$(pgrep -f 'imca mount .*/mnt/i$')
"""
import os
import shutil
import sys
import time

from procstat import cpu_ns as daemon_ns

FILES = 4000


def one_pass(d, pid):
    dd = os.path.join(d, f"fpc-{time.time_ns()}")
    os.makedirs(dd)
    files = [os.path.join(dd, f"f{i:05d}") for i in range(FILES)]
    for f in files:
        with open(f, "wb") as h:
            h.write(os.urandom(1024))
    time.sleep(2)
    c0, s0, t0 = daemon_ns(pid), time.thread_time_ns(), time.perf_counter()
    for f in files:
        os.stat(f)
    t1, s1, c1 = time.perf_counter(), time.thread_time_ns(), daemon_ns(pid)
    shutil.rmtree(dd)
    return FILES / (t1 - t0), (s1 - s0) / FILES / 1000, (c1 - c0) / FILES / 1000


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    targets = []
    for t in sys.argv[2:]:
        parts = t.split("=")
        if len(parts) != 3 or not os.path.isdir(parts[1]) or not os.path.isdir(f"/proc/{parts[2]}"):
            sys.exit(f"not NAME=DIR=PID with a directory and a live pid: {t}")
        targets.append(parts)
    res = {}
    for _ in range(rounds):
        for name, d, pid in targets:
            res.setdefault(name, []).append(one_pass(d, pid))
    for name, v in res.items():
        print(f"{name:8} stats/s {[round(x[0]) for x in v]}  process µs/stat {[round(x[1], 2) for x in v]}"
              f"  daemon µs/stat {[round(x[2], 2) for x in v]}")


main()
