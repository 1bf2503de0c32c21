#!/usr/bin/env bash
# Two gateways changing one directory at once (issue 34: a change must not
# wait out the other gateway's lease), in ONE run. For each binary given, a
# cluster (`imca up --no-cache`: 2 storage servers) with a second gateway B
# on the same servers. Each round: gateway A alone, then A and B at once,
# run a loop of create+write 1 byte+close, rename, unlink in one directory
# for SECS seconds each (A and B on different names); prints changes per
# second per gateway, and the slowest change seen.
#
# usage (root, python3): bench/scripts/two-gateways-one-dir.sh BIN [BIN...]
# knobs: SECS (5), ROUNDS (2)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
export SECS=${SECS:-5}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d /var/tmp/imca-twogw.XXXXXX)
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT

wait_file() { for _ in $(seq 600); do [ -f "$1" ] && return 0; sleep 0.1; done; echo "two-gateways-one-dir.sh: $1 did not appear" >&2; exit 1; }

# cluster NAME BIN: gateway A at $W/NAME-a, B at $W/NAME-b
cluster() {
    local name=$1 bin=$2
    "$bin" up --dir "$W/$name" --mount "$W/$name-a" --no-cache >"$W/$name.log" 2>&1 &
    PIDS+=($!)
    wait_file "$W/$name/cluster.json"
    local servers
    servers=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["storage_servers"]))' "$W/$name/cluster.json")
    mkdir -p "$W/$name-b"
    "$bin" mount --storage-servers "$servers" --secret-file "$W/$name/volume.secret" \
        --ready-file "$W/$name-b.ready" "$W/$name-b" >"$W/$name-b.log" 2>&1 &
    PIDS+=($!)
    wait_file "$W/$name-b.ready"
}

measure() { # measure NAME ROUND
    python3 - "$W/$1" "$1" "$2" <<'PY'
import json, os, sys, time, threading
base, name, rnd = sys.argv[1:4]
secs = float(os.environ["SECS"])
def churn(mount, d, tag, out):
    n, worst, end = 0, 0.0, time.perf_counter() + secs
    while time.perf_counter() < end:
        for step in range(3):
            t = time.perf_counter()
            a, b = f"{mount}/{d}/{tag}{n}", f"{mount}/{d}/{tag}{n}.r"
            if step == 0:
                with open(a, "wb") as f:
                    f.write(b"x")
            elif step == 1:
                os.rename(a, b)
            else:
                os.unlink(b)
            worst = max(worst, time.perf_counter() - t)
        n += 1
    out[tag] = (3 * n / secs, worst)
for mode in ["alone", "both"]:
    d = f"r{rnd}-{mode}"
    os.mkdir(f"{base}-a/{d}")
    os.listdir(f"{base}-b/{d}")  # gateway B holds the directory too
    out = {}
    ts = [threading.Thread(target=churn, args=(f"{base}-a", d, "a", out))]
    if mode == "both":
        ts.append(threading.Thread(target=churn, args=(f"{base}-b", d, "b", out)))
    for t in ts: t.start()
    for t in ts: t.join()
    r = {"target": name, "round": int(rnd), "mode": mode}
    for tag, (rate, worst) in sorted(out.items()):
        r[f"{tag}_changes_per_s"] = round(rate)
        r[f"{tag}_slowest_ms"] = round(worst * 1e3, 1)
    print(json.dumps(r), flush=True)
PY
}

echo "# $(date -u +%FT%TZ) SECS=$SECS; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
TARGETS=()
i=0
for bin in "$@"; do
    cluster "imca$i" "$bin"; TARGETS+=("imca$i")
    echo "# imca$i: $bin"
    i=$((i + 1))
done
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do measure "$t" "$r"; done
done
