#!/usr/bin/env python3
"""`ls -l` of a directory just written, through each mount, alternated.

For each of ROUNDS rounds: 2,000 files of 1 KiB are written into a new
directory of every target, 2 s pass (every TTL runs out), then
`ls -l DIR > /dev/null` runs three times in a row on each target in turn.
Prints the milliseconds of the 1st, 2nd and 3rd runs over the rounds, and
removes what it wrote.

usage: ls-l.py ROUNDS NAME=DIR [NAME=DIR ...]
"""
import os
import shutil
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    rounds, targets = int(sys.argv[1]), [t.split("=", 1) for t in sys.argv[2:]]
    res = {}
    for _ in range(rounds):
        dirs = {}
        for name, d in targets:
            dd = os.path.join(d, f"ls-{time.time_ns()}")
            os.makedirs(dd)
            for i in range(2000):
                with open(os.path.join(dd, f"f{i:05d}"), "wb") as f:
                    f.write(b"x" * 1024)
            dirs[name] = dd
        time.sleep(2)
        for k in range(3):
            for name, _ in targets:
                t = time.perf_counter()
                subprocess.run(["ls", "-l", dirs[name]], stdout=subprocess.DEVNULL, check=True)
                res.setdefault((name, k), []).append(round((time.perf_counter() - t) * 1000))
        for dd in dirs.values():
            shutil.rmtree(dd)
    for name, _ in targets:
        print(f"{name:8}", "  ".join(f"run {k + 1}: {res[(name, k)]} ms" for k in range(3)))


main()
