#!/usr/bin/env python3
"""Writes through mounts, alternated: 2,000 files of 1 KiB (create, write,
close each), then one file of 256 × 1 MiB writes. Prints files/s and MB/s
per round for every target, and removes what it wrote.

usage: write-rate.py ROUNDS NAME=DIR [NAME=DIR ...]
"""
import os
import shutil
import sys
import time


def one_round(d):
    dd = os.path.join(d, f"wr-{time.time_ns()}")
    os.makedirs(dd)
    t0 = time.perf_counter()
    for i in range(2000):
        with open(os.path.join(dd, f"f{i}"), "wb") as f:
            f.write(b"x" * 1024)
    small = 2000 / (time.perf_counter() - t0)
    buf = os.urandom(1 << 20)
    t0 = time.perf_counter()
    with open(os.path.join(dd, "big"), "wb") as f:
        for _ in range(256):
            f.write(buf)
    big = 256 / (time.perf_counter() - t0)
    shutil.rmtree(dd)  # 256 MiB a round: not left behind
    return small, big


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    targets = [t.split("=", 1) for t in sys.argv[2:]]
    for t in targets:
        if len(t) != 2 or not os.path.isdir(t[1]):
            sys.exit(f"not NAME=DIR with a directory: {'='.join(t)}")
    res = {}
    for _ in range(int(sys.argv[1])):
        for name, d in targets:
            res.setdefault(name, []).append(one_round(d))
    for name, v in res.items():
        print(f"{name:8} 1 KiB files written/s {[round(x[0]) for x in v]}  sequential MB/s {[round(x[1]) for x in v]}")


main()
