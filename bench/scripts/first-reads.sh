#!/usr/bin/env bash
# What another gateway's first read of new files costs (issue 34: "what one
# gateway writes, the others' first reads find in the bank"), in ONE run.
# For each binary given, two clusters: `imca up` (2 storage servers, 2 cache
# nodes) and `imca up --no-cache`, each with two more gateways (B, C) on the
# same servers. Each round, per cluster: N files of SIZE bytes are written
# through gateway A into a fresh directory, then read whole through B, then
# through C (open+read+close of each, kernel caches dropped before each
# pass); prints µs per file for the write and each read pass.
#
# usage (root, python3): bench/scripts/first-reads.sh BIN [BIN...]
# knobs: N (3000), SIZE (1024), ROUNDS (3)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
export N=${N:-3000} SIZE=${SIZE:-1024}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /var/tmp/imca-first.XXXXXX)
PIDS=()
. "$(dirname "$0")/clusters.sh"
cleanup() { set +e; stop_all; rm -rf "$W"; }
trap cleanup EXIT

# cluster NAME BIN [up flags]: gateway A at $W/NAME-a, B and C at $W/NAME-b, $W/NAME-c
cluster() {
    local name=$1 bin=$2; shift 2
    start_up "$bin" "$W/$name" "$W/$name-a" "$@"
    for g in b c; do add_gateway "$bin" "$W/$name" "$W/$name-$g"; done
}

measure() { # measure NAME ROUND
    python3 - "$W/$1" "$1" "$2" <<'PY'
import json, os, sys, time
base, name, rnd = sys.argv[1:4]
n, size = int(os.environ["N"]), int(os.environ["SIZE"])
d = f"r{rnd}"
data = os.urandom(size)
def drop():
    os.sync()
    open("/proc/sys/vm/drop_caches", "w").write("3")
out = {"target": name, "round": int(rnd), "files": n, "size": size}
os.makedirs(f"{base}-a/{d}")
t0 = time.perf_counter()
for i in range(n):
    with open(f"{base}-a/{d}/f{i}", "wb") as f:
        f.write(data)
out["write_us"] = round((time.perf_counter() - t0) / n * 1e6)
time.sleep(1)  # (what the servers put at close goes out after the replies)
for g in "bc":
    drop()
    t0 = time.perf_counter()
    for i in range(n):
        with open(f"{base}-{g}/{d}/f{i}", "rb") as f:
            assert f.read() == data, f"{name}: {g} read other bytes"
    out[f"read_{g}_us"] = round((time.perf_counter() - t0) / n * 1e6)
print(json.dumps(out))
PY
}

echo "# $(date -u +%FT%TZ) N=$N SIZE=$SIZE; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
TARGETS=()
i=0
for bin in "$@"; do
    cluster "bank$i" "$bin" --cache-mb 256; TARGETS+=("bank$i")
    cluster "nobank$i" "$bin" --no-cache; TARGETS+=("nobank$i")
    echo "# bank$i, nobank$i: $bin"
    i=$((i + 1))
done
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do measure "$t" "$r"; done
done
