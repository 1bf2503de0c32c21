#!/usr/bin/env bash
# What other gateways cost a writer of small files: every mutation is called
# back to every other gateway of the volume, and acknowledged by each before
# the writer gets its answer (issue 12's coherence promise).
#
# For K in $IDLE (default "0 1 2 4"): `imca up --no-cache` plus K more gateways
# that only mounted the volume; one process writes 2,000 files of 1 KiB
# (create, write, close each) through the first gateway, ROUNDS times, with a
# bindfs mount of a local directory written in between as the reference.
# Prints files/s per round, the writer's gateway's CPU per file and each idle
# gateway's, and tears every cluster down (nothing is left on disk).
#
# usage (root; bindfs, python3): cargo build --release -p imca
#        bench/scripts/idle-gateways.sh [target/release/imca]
# knobs: IDLE ("0 1 2 4"), ROUNDS (3)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
IDLE=${IDLE:-"0 1 2 4"} ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /var/tmp/imca-idle.XXXXXX)
PIDS=()
stop_all() {
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}
cleanup() {
    set +e
    stop_all
    fusermount3 -u -z "$W/bindfs" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/local" "$W/bindfs"
bindfs "$W/local" "$W/bindfs"

wait_file() { # wait_file PATH LOG: until PATH exists (60 s), else show LOG and fail
    for _ in $(seq 600); do [ -f "$1" ] && return 0; sleep 0.1; done
    echo "never ready: $1" >&2; tail -20 "$2" >&2; exit 1
}

for k in $IDLE; do
    C="$W/k$k"
    mkdir -p "$C/m0"
    "$BIN" up --no-cache --dir "$C/c" --mount "$C/m0" > "$C/up.log" 2>&1 & PIDS+=($!)
    wait_file "$C/c/cluster.json" "$C/up.log"
    servers=$(python3 -c "import json,sys; print(','.join(json.load(open(sys.argv[1]))['storage_servers']))" "$C/c/cluster.json")
    idle=()
    for g in $(seq "$k"); do
        mkdir -p "$C/m$g"
        "$BIN" mount --storage-servers "$servers" --secret-file "$C/c/volume.secret" \
            --ready-file "$C/c/g$g.ready" "$C/m$g" > "$C/g$g.log" 2>&1 & PIDS+=($!)
        idle+=($!)
    done
    for g in $(seq "$k"); do wait_file "$C/c/g$g.ready" "$C/g$g.log"; done
    writer=$(pgrep -f "imca mount .* $C/m0\$" | head -1)
    python3 - "$ROUNDS" "$k" "$W/bindfs" "$C/m0" "$writer" "${idle[@]}" <<'PY'
import glob, os, shutil, sys, time
rounds, k, bindfs, mount, writer, idle = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
def cpu(pid):
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(open(f).read().split()[0])
        except OSError:
            pass
    return total
def write(d):
    dd = os.path.join(d, f"w-{time.time_ns()}")
    os.makedirs(dd)
    t = time.perf_counter()
    for i in range(2000):
        with open(os.path.join(dd, f"f{i}"), "wb") as f:
            f.write(b"x" * 1024)
    return 2000 / (time.perf_counter() - t), dd
ref, rates, gw, others = [], [], [], []
for _ in range(rounds):
    rate, dd = write(bindfs)
    ref.append(round(rate))
    shutil.rmtree(dd)
    pids = [writer] + idle
    before = [cpu(p) for p in pids]
    rate, dd = write(mount)
    after = [cpu(p) - b for p, b in zip(pids, before)]
    rates.append(round(rate))
    shutil.rmtree(dd)
    gw.append(round(after[0] / 2000 / 1000))
    others += [round(a / 2000 / 1000) for a in after[1:]]
print(f"{k} idle gateways: IMCa files/s {rates}  bindfs {ref}  "
      f"writer's gateway µs CPU/file {gw}  each idle gateway {sorted(others) if others else '-'}", flush=True)
PY
    stop_all
    rm -rf "$C"
done
