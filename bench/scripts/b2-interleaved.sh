#!/usr/bin/env bash
# B2 (latency), side by side: a no-cache cluster and an IMCa cluster (one
# cache node) run at the same time, and measurements alternate between them
# (no cache, then each block size) for REPS rounds, so load from elsewhere
# hits every configuration alike. One JSON line per measurement; also a
# sequential-read line per block size (32 MiB file, 128 KiB reads, as FUSE
# sends them with the page cache in use).
#
#   bench/scripts/b2-interleaved.sh [IMCA_BINARY] [REPS]
set -euo pipefail
IMCA=${1:-target/release/imca}
REPS=${2:-3}
WORK=$(mktemp -d /tmp/imca-b2.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
up() {
  local name=$1; shift
  mkdir -p "$WORK/$name"
  "$IMCA" up --dir "$WORK/$name/data" --mount "$WORK/$name/mnt" --stripe-unit 128K "$@" >"$WORK/$name/up.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do [ -f "$WORK/$name/data/cluster.json" ] && return; sleep 0.1; done
  cat "$WORK/$name/up.log"; exit 1
}
up nocache --no-cache
up imca --cache-nodes 1
C="$WORK/imca/data/cluster.json"
"$IMCA" ctl --cluster "$C" timeout 50 >/dev/null
seqread() { # seqread DIR LABEL
  local f="$1/seq.bin"
  [ -f "$f" ] || dd if=/dev/zero of="$f" bs=1M count=32 status=none
  dd if="$f" of=/dev/null bs=128K status=none  # warm (populates the bank)
  local t0=$(date +%s.%N); dd if="$f" of=/dev/null bs=128K status=none; local t1=$(date +%s.%N)
  echo "{\"bench\":\"seqread\",\"label\":\"$2\",\"mib_per_s\":$(echo "32 / ($t1 - $t0)" | bc -l)}"
}
for rep in $(seq "$REPS"); do
  "$IMCA" bench latency --dir "$WORK/nocache/mnt" --direct --label nocache --json
  seqread "$WORK/nocache/mnt" nocache
  for bs in 256 2048 8192 131072; do
    "$IMCA" ctl --cluster "$C" block-size "$bs" >/dev/null; sleep 1.5
    "$IMCA" bench latency --dir "$WORK/imca/mnt" --direct --label "bs$bs" --json
    seqread "$WORK/imca/mnt" "bs$bs"
  done
done
