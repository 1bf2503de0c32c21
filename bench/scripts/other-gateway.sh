#!/usr/bin/env bash
# What a gateway pays for files another gateway wrote (issue 12, holds): a
# gateway lets its kernel cache an inode only once every server holds it for
# that gateway, so the first answers about a file written elsewhere get TTL 0.
#
# For each binary given (e.g. this build and an older one), a cluster:
# `imca up --no-cache` (gateway 0) plus a second gateway (`imca mount`); and
# bindfs: two bindfs mounts of one local directory. Each round, for every
# target in turn: N files of 1 KiB are written through the first mount into a
# fresh directory, then through the second mount
#   stat 1/2/3   three passes of os.stat over the names, one after another
#   ls -l        (another fresh directory) `ls -l` of it, then one stat pass
# Prints ops/s (ls -l: ms) per round; tears everything down.
#
# usage (root; bindfs, python3): bench/scripts/other-gateway.sh BIN [BIN...]
# knobs: N (2000), ROUNDS (3)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
export N=${N:-2000}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /var/tmp/imca-other.XXXXXX)
PIDS=()
. "$(dirname "$0")/clusters.sh"
cleanup() {
    set +e
    stop_all
    fusermount3 -u -z "$W/b0" 2>/dev/null
    fusermount3 -u -z "$W/b1" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/local" "$W/b0" "$W/b1"
bindfs "$W/local" "$W/b0"
bindfs "$W/local" "$W/b1"
args=("bindfs=$W/b0=$W/b1")
k=0
for bin in "$@"; do
    C="$W/c$k"
    mkdir -p "$C"
    start_up "$bin" "$C/c" "$C/m0" --no-cache
    add_gateway "$bin" "$C/c" "$C/m1"
    args+=("imca#$k($(basename "$(dirname "$(dirname "$(realpath "$bin")")")")/$(basename "$bin"))=$C/m0=$C/m1")
    k=$((k + 1))
done
python3 - "$ROUNDS" "${args[@]}" <<'PY'
import os, shutil, subprocess, sys, time
rounds, n = int(sys.argv[1]), int(os.environ["N"])
targets = [a.split("=") for a in sys.argv[2:]]
def fresh(first):
    name = f"d-{time.time_ns()}"
    os.makedirs(os.path.join(first, name))
    for i in range(n):
        with open(os.path.join(first, name, f"f{i}"), "wb") as f:
            f.write(b"x" * 1024)
    return name
def stat_pass(paths):
    t = time.perf_counter()
    for p in paths:
        os.stat(p)
    return round(n / (time.perf_counter() - t))
res = {}
for _ in range(rounds):
    for label, first, second in targets:
        r = res.setdefault(label, {"stat 1": [], "stat 2": [], "stat 3": [], "ls -l ms": [], "stat after ls": []})
        name = fresh(first)
        paths = [os.path.join(second, name, f"f{i}") for i in range(n)]
        for k in ("stat 1", "stat 2", "stat 3"):
            r[k].append(stat_pass(paths))
        name2 = fresh(first)
        t = time.perf_counter()
        subprocess.run(["ls", "-l", os.path.join(second, name2)], check=True, stdout=subprocess.DEVNULL)
        r["ls -l ms"].append(round((time.perf_counter() - t) * 1000, 1))
        r["stat after ls"].append(stat_pass([os.path.join(second, name2, f"f{i}") for i in range(n)]))
        shutil.rmtree(os.path.join(first, name))
        shutil.rmtree(os.path.join(first, name2))
for label, *_ in targets:
    print(label, "  ".join(f"{k} {v}" for k, v in res[label].items()), flush=True)
PY
