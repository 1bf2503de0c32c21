#!/usr/bin/env bash
# What other gateways cost a writer of small files: every mutation is called
# back to every other gateway of the volume, and acknowledged by each before
# the writer gets its answer (issue 12's coherence promise).
#
# For each K in $IDLE (default "0 1 2 4"), a cluster: `imca up --no-cache` plus
# K more gateways that only mounted the volume. One process writes 2,000 files
# of 1 KiB (create, write, close each) through each cluster's first gateway and
# through a bindfs mount of a local directory, in turn, ROUNDS times. Prints
# files/s per round, the writer's gateway's CPU per file and each idle
# gateway's, and tears everything down (nothing is left on disk).
# With WATCH=1 every idle gateway lists each round's directory once it is
# made, so it holds it: each new name's callback (the directory's
# attributes) is then waited for, as for gateways that look at the files.
#
# usage (root; bindfs, python3): cargo build --release -p imca
#        bench/scripts/idle-gateways.sh [target/release/imca [OTHER_BIN...]]
# (several binaries: each gets its clusters, all in the same rounds)
# knobs: IDLE ("0 1 2 4"), ROUNDS (3), WATCH (0)
set -euo pipefail
[ $# -ge 1 ] || set -- target/release/imca
IDLE=${IDLE:-"0 1 2 4"} ROUNDS=${ROUNDS:-3}
export WATCH=${WATCH:-0}
W=$(mktemp -d /var/tmp/imca-idle.XXXXXX)
PIDS=()
. "$(dirname "$0")/clusters.sh"
cleanup() {
    set +e
    stop_all
    fusermount3 -u -z "$W/bindfs" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/local" "$W/bindfs"
bindfs "$W/local" "$W/bindfs"

# Every cluster runs at once and the rounds alternate over them (and bindfs):
# this machine's speed drifts by 2x over minutes, bindfs's included.
args=()
b=0
for BIN in "$@"; do
BIN=$(realpath "$BIN")
for k in $IDLE; do
    C="$W/b$b-k$k"
    mkdir -p "$C"
    start_up "$BIN" "$C/c" "$C/m0" --no-cache
    idle=()
    for g in $(seq "$k"); do
        add_gateway "$BIN" "$C/c" "$C/m$g"
        idle+=("$GATEWAY_PID")
    done
    writer=$(pgrep -f "imca[a-z0-9-]* mount .* $C/m0\$" | head -1)
    label=$k
    [ $# -gt 1 ] && label="$k ($BIN)"
    args+=("$label=$C/m0=$writer=$(IFS=,; echo "${idle[*]}")")
done
b=$((b + 1))
done
PYTHONPATH="$(dirname "$0")" python3 - "$ROUNDS" "$W/bindfs" "${args[@]}" <<'PY'
import os, shutil, sys, time
from procstat import cpu_ns as cpu
rounds, bindfs = int(sys.argv[1]), sys.argv[2]
targets = [a.split("=") for a in sys.argv[3:]]
watch = os.environ["WATCH"] == "1"
def write(d, pids):
    name = f"w-{time.time_ns()}"
    dd = os.path.join(d, name)
    os.makedirs(dd)
    if watch and d != bindfs:
        # the idle gateways' mounts are the writer's siblings: m1, m2, ...
        for g in range(1, len(pids)):
            os.listdir(os.path.join(os.path.dirname(d), f"m{g}", name))
    before = [cpu(p) for p in pids]
    t = time.perf_counter()
    for i in range(2000):
        with open(os.path.join(dd, f"f{i}"), "wb") as f:
            f.write(b"x" * 1024)
    rate = 2000 / (time.perf_counter() - t)
    used = [round((cpu(p) - b) / 2000 / 1000) for p, b in zip(pids, before)]
    shutil.rmtree(dd)
    return round(rate), used
res = {}
for _ in range(rounds):
    res.setdefault("bindfs", []).append(write(bindfs, [])[0])
    for k, mount, writer, idle in targets:
        rate, used = write(mount, [writer] + [p for p in idle.split(",") if p])
        r = res.setdefault(k, {"rate": [], "gw": [], "idle": []})
        r["rate"].append(rate)
        r["gw"].append(used[0])
        r["idle"] += used[1:]
print(f"bindfs              files/s {res['bindfs']}")
for k, *_ in targets:
    r = res[k]
    print(f"{k} idle gateways: IMCa files/s {r['rate']}  writer's gateway µs CPU/file {r['gw']}  "
          f"each idle gateway {sorted(r['idle']) if r['idle'] else '-'}", flush=True)
PY
