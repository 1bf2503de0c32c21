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
. "$(dirname "$0")/clusters.sh"
cleanup() { set +e; stop_all; rm -rf "$W"; }
trap cleanup EXIT

# cluster NAME BIN: gateway A at $W/NAME-a, B at $W/NAME-b
cluster() {
    start_up "$2" "$W/$1" "$W/$1-a" --no-cache
    add_gateway "$2" "$W/$1" "$W/$1-b"
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
