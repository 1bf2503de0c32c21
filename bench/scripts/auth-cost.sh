#!/usr/bin/env bash
# What the trust boundary costs: the same cluster (`imca up`: 2 storage
# servers, 2 cache nodes, 1 gateway) with the volume secret (the default:
# authenticated RPC, MACed bank values) and with --insecure, alternated
# ROUNDS times in one run, beside bindfs over a local directory (the FUSE
# ceiling on this machine). Workloads, on files written through the mount:
#   stat     N files, two passes (per-op µs)
#   read4k   open+pread 4 KiB+close of each file (µs), files in the bank
#   read128k 128 KiB preads of one 64 MiB file, warm (MB/s)
# usage: bench/scripts/auth-cost.sh [path/to/release/imca]   (root; bindfs)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
N=${N:-2000}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /var/tmp/imca-auth.XXXXXX)
UP=""
cleanup() {
    [ -n "$UP" ] && { kill -INT "$UP" 2>/dev/null; wait "$UP" 2>/dev/null || true; }
    fusermount3 -u -z "$W/bindfs" 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT

up() { # up NAME [flags]: a fresh cluster, mounted at $W/NAME-mnt
    local name=$1; shift
    rm -rf "$W/$name" "$W/$name-mnt"
    "$BIN" up --dir "$W/$name" --mount "$W/$name-mnt" "$@" >"$W/$name.out" 2>&1 & UP=$!
    for _ in $(seq 1200); do [ -f "$W/$name/cluster.json" ] && return 0; sleep 0.1; done
    cat "$W/$name.out" >&2; echo "imca up $name did not come up" >&2; exit 1
}
down() { kill -INT "$UP"; wait "$UP" || true; UP=""; }

measure() { # measure DIR LABEL: prints one JSON line
    python3 - "$1" "$2" "$N" <<'PY'
import json, os, sys, time
d, label, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [os.path.join(d, f"f{i:05d}") for i in range(n)]
for f in files:
    with open(f, "wb") as h:
        h.write(os.urandom(4096))
big = os.path.join(d, "big")
with open(big, "wb") as h:
    h.write(os.urandom(64 << 20))
def timed(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t
def stat_all():
    for f in files: os.stat(f)
def read_all():
    for f in files:
        fd = os.open(f, os.O_RDONLY); os.pread(fd, 4096, 0); os.close(fd)
def read_big():
    fd = os.open(big, os.O_RDONLY)
    for off in range(0, 64 << 20, 128 << 10): os.pread(fd, 128 << 10, off)
    os.close(fd)
read_all(); read_big()   # warm: the bank (IMCa) or the page cache (bindfs) holds them
s1 = timed(stat_all); s2 = timed(stat_all); r = timed(read_all); b = min(timed(read_big) for _ in range(3))
print(json.dumps({"target": label, "stat_us": [round(s1 / n * 1e6, 1), round(s2 / n * 1e6, 1)],
                  "read4k_us": round(r / n * 1e6, 1), "read128k_MBps": round(64 / b * 1.048576, 1)}))
PY
}

mkdir -p "$W/local" "$W/bindfs"
bindfs "$W/local" "$W/bindfs"
for r in $(seq "$ROUNDS"); do
    echo "# round $r/$ROUNDS" >&2
    measure "$W/bindfs" bindfs; rm -rf "${W:?}/local/"*
    up secure;   measure "$W/secure-mnt" "imca (secret)";    down
    up insecure --insecure; measure "$W/insecure-mnt" "imca --insecure"; down
done
