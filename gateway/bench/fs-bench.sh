#!/usr/bin/env bash
# Gateway benchmark: the same fio/stat workloads against
#   local   - a plain directory on this disk
#   bindfs  - a FUSE passthrough of it (Debian bindfs: the FUSE ceiling here)
#   imca    - `imca mount` over 2 storage servers on the same disk (no cache)
#   imca+c  - the same with 2 `imca cache-node`s (CMCache)
# usage: gateway/bench/fs-bench.sh [path/to/release/imca]   (needs fio, bindfs; root)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
W=$(mktemp -d /var/tmp/imca-bench.XXXXXX)
SIZE=${SIZE:-512M}          # per job
PIDS=()
cleanup() {
    for m in "$W"/mnt* "$W/bindfs"; do fusermount3 -u -z "$m" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT

ready() { for _ in $(seq 3000); do [ -f "$1" ] && return 0; sleep 0.01; done; echo "timeout waiting for $1" >&2; exit 1; }
field() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

mkdir -p "$W"/{local,bindfs,s0,s1,mnt,mntc}
"$BIN" secret new "$W/volume.secret" >/dev/null
export IMCA_SECRET_FILE="$W/volume.secret"   # read by every storage and mount below
bindfs "$W/local" "$W/bindfs"
for i in 0 1; do
    "$BIN" storage --export "$W/s$i" --listen 127.0.0.1:0 --ready-file "$W/s$i.ready" 2>"$W/s$i.log" & PIDS+=($!)
done
for i in 0 1; do
    "$BIN" cache-node -l 127.0.0.1 -p 0 -m 1024 --ready-file "$W/c$i.ready" 2>"$W/c$i.log" & PIDS+=($!)
done
for f in s0 s1 c0 c1; do ready "$W/$f.ready"; done
SS=$(field "$W/s0.ready" addr),$(field "$W/s1.ready" addr)
CN=$(field "$W/c0.ready" addr),$(field "$W/c1.ready" addr)
"$BIN" mount --storage-servers "$SS" --ready-file "$W/g.ready" "$W/mnt" 2>"$W/g.log" & PIDS+=($!)
ready "$W/g.ready"
"$BIN" mount --storage-servers "$SS" --cache-nodes "$CN" --ready-file "$W/gc.ready" "$W/mntc" 2>"$W/gc.log" & PIDS+=($!)
ready "$W/gc.ready"

fio_bw() { # dir rw jobs -> MiB/s
    local dir=$1 rw=$2 jobs=$3
    fio --name=b --directory="$dir" --rw="$rw" --bs=1M --size="$SIZE" --numjobs="$jobs" --ioengine=psync \
        --end_fsync=1 --group_reporting --output-format=json 2>/dev/null |
        python3 -c "import json,sys;j=json.load(sys.stdin)['jobs'][0];print(round((j['read']['bw']+j['write']['bw'])/1024))"
}
fio_lat() { # dir -> mean 4 KiB random read latency in µs
    fio --name=b --directory="$1" --rw=randread --bs=4k --size="$SIZE" --numjobs=1 --ioengine=psync \
        --runtime=5 --time_based --output-format=json 2>/dev/null |
        python3 -c "import json,sys;j=json.load(sys.stdin)['jobs'][0];print(round(j['read']['clat_ns']['mean']/1000,1))"
}
stat_rate() { # dir -> stats/s over 1000 files
    python3 - "$1" <<'PY'
import os, sys, time
d = os.path.join(sys.argv[1], "statdir"); os.makedirs(d, exist_ok=True)
names = [os.path.join(d, "f%04d" % i) for i in range(1000)]
for n in names: open(n, "w").close()
n = 0; t0 = time.time()
while time.time() - t0 < 3:
    for p in names: os.stat(p)
    n += len(names)
print(round(n / (time.time() - t0)))
PY
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

printf "%-8s %10s %10s %10s %10s %12s %10s\n" target "wr1 MiB/s" "wr4 MiB/s" "rd1 MiB/s" "rd4 MiB/s" "4k rd lat us" "stat/s"
for t in local bindfs mnt mntc; do
    d="$W/$t"
    w1=$(fio_bw "$d" write 1); w4=$(fio_bw "$d" write 4)
    drop; r1=$(fio_bw "$d" read 1); drop; r4=$(fio_bw "$d" read 4)
    lat=$(fio_lat "$d"); st=$(stat_rate "$d")
    name=$t; [ "$t" = mnt ] && name=imca; [ "$t" = mntc ] && name=imca+c
    printf "%-8s %10s %10s %10s %10s %12s %10s\n" "$name" "$w1" "$w4" "$r1" "$r4" "$lat" "$st"
done
