#!/usr/bin/env bash
# The first stat pass through the same client (issue 12's "stat/s, first pass"), bindfs
# against `imca up --no-cache` (kernel cache on), alternated ROUNDS times (default 5) in
# one run: 2,000 files of 1 KiB made through the mount, 2 s for every TTL to run out, then
# one `stat` of each, by one process and then by 4 processes (a quarter each). Both pay
# one FUSE crossing per file here (bindfs: its entry expired; IMCa: its lease ran out, and
# the kernel dropped the attributes after the write), so this is the crossing's cost.
# Give a second binary (an older build) to run it beside the first in the same rounds.
# Prints each pass's rate and every target's median ÷ bindfs's.
# usage (root; bindfs): cargo build --release -p imca; bench/scripts/first-pass.sh target/release/imca [OLD_BIN]
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}"); OLD=${2:+$(realpath "$2")}
W=$(mktemp -d /var/tmp/fpab.XXXX)
mkdir -p $W/local $W/bindfs
bindfs $W/local $W/bindfs
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -INT $p 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait $p 2>/dev/null || true; done
    fusermount3 -u -z $W/bindfs; rm -rf $W
}
trap cleanup EXIT
TARGETS=("bindfs=$W/bindfs")
start() { # name bin
    "$2" up --no-cache --dir $W/c-$1 --mount $W/m-$1 > $W/up-$1.log 2>&1 & PIDS+=($!)
    for i in $(seq 300); do [ -f $W/c-$1/cluster.json ] && break; sleep 0.1; done
    [ -f $W/c-$1/cluster.json ] || { cat $W/up-$1.log; exit 1; }
    TARGETS+=("$1=$W/m-$1")
}
start imca "$BIN"
[ -n "$OLD" ] && start old "$OLD"
python3 - "${ROUNDS:-5}" "${TARGETS[@]}" <<'PY'
import os, sys, time
from multiprocessing import Barrier, Process
def setup(d, tag):
    os.makedirs(os.path.join(d, tag))
    files = [os.path.join(d, tag, f"f{i:05d}") for i in range(2000)]
    for f in files: open(f, "wb").write(os.urandom(1024))
    time.sleep(2)
    return files
def stat_all(files, b=None):
    if b: b.wait()
    for f in files: os.stat(f)
def one(files):
    t = time.perf_counter(); stat_all(files)
    return round(len(files) / (time.perf_counter() - t))
def four(files):
    b = Barrier(5)
    ps = [Process(target=stat_all, args=(files[i::4], b)) for i in range(4)]
    for p in ps: p.start()
    b.wait(); t = time.perf_counter()
    for p in ps: p.join()
    return round(len(files) / (time.perf_counter() - t))
rounds, targets = int(sys.argv[1]), [t.split("=", 1) for t in sys.argv[2:]]
res = {}
for r in range(rounds):
    for name, d in targets:
        for mode, run in (("1 process", one), ("4 processes", four)):
            res.setdefault((mode, name), []).append(run(setup(d, f"{mode[0]}r{r}")))
med = lambda xs: sorted(xs)[len(xs) // 2]
for mode in ("1 process", "4 processes"):
    base = med(res[(mode, "bindfs")])
    for name, _ in targets:
        xs = res[(mode, name)]
        print(f"{mode:12} {name:7} stats/s {xs} median {med(xs)} ÷ bindfs {med(xs) / base:.2f}")
PY
