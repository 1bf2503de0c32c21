#!/usr/bin/env bash
# vs-glusterfs.sh - IMCa beside GlusterFS, a local directory and a FUSE passthrough, in ONE
# run of the shared peer script (../shared/peers/glusterfs-baseline.sh), so every row of its
# table is measured by the same code, in the same window, on the same disk.
#
# Rows: local dir, bindfs passthrough of it, GlusterFS 10.3 (Debian defaults, distribute volume,
# 2 bricks on loopback, FUSE mount), `imca up --no-cache` (2 storage servers, no cache nodes),
# `imca up` (2 storage servers + 2 `imca cache-node`s, CACHE_MB each) and, with KC=1 (default),
# `imca up --no-cache --kernel-cache off` (the gateway that caches nothing in the kernel).
#
# usage (root, from the repository root):
#   cargo build --release -p imca
#   bench/scripts/vs-glusterfs.sh [target/release/imca]
# knobs: N (small files, 5000), SEQ_MB (file size, 512), CACHE_MB (per cache node, 1024),
#        W (work dir, /var/tmp/gb; deleted at the end), PEER (the peer script),
#        QUIET_MAX (s the peer script waits for an idle machine before each row, 90),
#        RESULTS (the peer's tab-separated rows, /tmp/vs-glusterfs.results; kept),
#        KC (1: add the --kernel-cache off row), REVERSE (1: measure the rows in reverse order, to
#        see whether load that drifts during the run favoured the rows measured late)
# Everything this starts is stopped on exit: both `imca up` by SIGINT (they unmount first),
# gluster via `PEER teardown` with PURGE=1 (volume and bricks deleted).
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
PEER=$(realpath "${PEER:-../shared/peers/glusterfs-baseline.sh}")
W=${W:-/var/tmp/gb}
export N=${N:-5000} SEQ_MB=${SEQ_MB:-512} QUIET_MAX=${QUIET_MAX:-90}
export RESULTS=${RESULTS:-/tmp/vs-glusterfs.results} STATE=${STATE:-/tmp/vs-glusterfs.state}
# keep all of the peer's directories on the same disk as the IMCa exports
export GFS_ROOT=$W/gfs GFS_MNT=$W/gfs-mnt LOCAL_DIR=$W/local BINDFS_MNT=$W/bindfs-mnt
CACHE_MB=${CACHE_MB:-1024}
UP_PIDS=()

cleanup() {
    set +e
    for p in "${UP_PIDS[@]}"; do kill -INT "$p" 2>/dev/null; done   # imca up unmounts, then stops its children
    for p in "${UP_PIDS[@]}"; do
        for _ in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$p" 2>/dev/null && { echo "imca up $p ignored SIGINT, sending SIGTERM" >&2; kill -TERM "$p"; }
        wait "$p" 2>/dev/null
    done
    for m in "$W/imca-mnt" "$W/imcanc-mnt" "$W/imcakc-mnt"; do
        findmnt -n "$m" >/dev/null 2>&1 && { echo "still mounted: $m" >&2; fusermount3 -u -z "$m"; }
    done
    PURGE=1 "$PEER" teardown
    rm -rf "$W"
}
trap cleanup EXIT

# `imca up` in the background; ready when DIR/cluster.json exists (written once mounted)
up() { # dir mount [args...]
    local dir=$1 mnt=$2; shift 2
    mkdir -p "$dir"
    "$BIN" up --dir "$dir" --mount "$mnt" "$@" >"$dir.out" 2>&1 & UP_PIDS+=($!)
    local pid=$!
    for _ in $(seq 1200); do
        [ -f "$dir/cluster.json" ] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$dir.out" >&2; echo "imca up ($dir) died" >&2; exit 1; }
        sleep 0.1
    done
    echo "imca up ($dir): no cluster.json after 120 s" >&2; exit 1
}
up "$W/imca" "$W/imca-mnt" --cache-mb "$CACHE_MB"
up "$W/imcanc" "$W/imcanc-mnt" --no-cache
ROWS=("$LOCAL_DIR=local" "$BINDFS_MNT=bindfs" "$GFS_MNT=glusterfs"
      "$W/imcanc-mnt=imca (no cache)" "$W/imca-mnt=imca + 2 cache nodes")
if [ "${KC:-1}" = 1 ]; then
    up "$W/imcakc" "$W/imcakc-mnt" --no-cache --kernel-cache off
    ROWS+=("$W/imcakc-mnt=imca --kernel-cache off (no cache nodes)")
fi
if [ "${REVERSE:-0}" = 1 ]; then
    for ((i = ${#ROWS[@]} - 1; i >= 0; i--)); do R+=("${ROWS[i]}"); done; ROWS=("${R[@]}")
fi

"$PEER" setup
"$PEER" perf default     # Debian 10.3 defaults (resets anything a previous run set)
"$PEER" bindfs
# the peer records the newest bindfs PID (pgrep -n): drop it unless it is really ours, so that
# teardown can never stop somebody else's bindfs
if [ -f "$STATE" ]; then
    while read -r name pid; do
        if [ "$name" != bindfs ] || tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | grep -q -- "$BINDFS_MNT"; then
            echo "$name $pid"
        fi
    done <"$STATE" >"$STATE.new"; mv "$STATE.new" "$STATE"
fi
{ echo "# repo HEAD (not necessarily what BIN was built from) $(git -C "$(dirname "$BIN")" rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ)"
  echo "# $(glusterfs --version | head -1); $(bindfs --version | head -1); $(fio --version); $(uname -r); N=$N SEQ_MB=$SEQ_MB CACHE_MB=$CACHE_MB"
} >&2
"$PEER" bench "${ROWS[@]}"
# CMCache's hits and misses over the whole run (gateway of the cluster with cache nodes)
python3 - "$W/imca/cluster.json" >&2 <<'PY' || true
import json, re, sys, urllib.request
for m in json.load(open(sys.argv[1]))["metrics"]:
    try: body = urllib.request.urlopen(m if m.startswith("http") else f"http://{m}/metrics", timeout=5).read().decode()
    except Exception: continue
    for l in body.splitlines():
        if l.startswith("imca_gateway_cache_total"): print("#", l)
PY
