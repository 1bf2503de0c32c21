#!/usr/bin/env bash
# B1 (stat) and B2 (latency) side by side in one run: no cache vs IMCa with
# 1 and 2 cache nodes (B1, warm and cold) and block sizes 256 B, 2 KiB,
# 8 KiB (B2). Prints one JSON line per measurement to stdout.
#
#   bench/scripts/b1b2.sh [IMCA_BINARY] [FILES] [CLIENTS]
#
# Needs root for --cold (drop_caches) and FUSE. Every cluster is a fresh
# `imca up` on loopback.
set -euo pipefail
IMCA=${1:-target/release/imca}
FILES=${2:-8192}
CLIENTS=${3:-"1 8"}
WORK=$(mktemp -d /tmp/imca-b1b2.XXXXXX)
trap 'kill $UP 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

up() { # up NAME ARGS... : start a cluster, wait for cluster.json
  local name=$1; shift
  rm -rf "$WORK/$name"; mkdir -p "$WORK/$name"
  "$IMCA" up --dir "$WORK/$name/data" --mount "$WORK/$name/mnt" --stripe-unit 128K "$@" >"$WORK/$name/up.log" 2>&1 &
  UP=$!
  for _ in $(seq 600); do [ -f "$WORK/$name/data/cluster.json" ] && break; sleep 0.1; done
  [ -f "$WORK/$name/data/cluster.json" ] || { cat "$WORK/$name/up.log"; exit 1; }
  MNT="$WORK/$name/mnt"; CLUSTER="$WORK/$name/data/cluster.json"
}
down() { kill "$UP"; wait "$UP" 2>/dev/null || true; }
ctl() { "$IMCA" ctl --cluster "$CLUSTER" "$@" >/dev/null; }

for setup in "nocache --no-cache" "imca-1node --cache-nodes 1" "imca-2nodes --cache-nodes 2"; do
  set -- $setup; name=$1; shift
  up "$name" "$@"
  [ "$name" != nocache ] && ctl timeout 50 && ctl block-size 2048 && sleep 1.5
  # B1: create + one untimed pass (fills the bank), then timed warm and cold runs
  "$IMCA" bench stat --dir "$MNT" --files "$FILES" --label "$name-fill" --json >/dev/null
  for k in $CLIENTS; do
    "$IMCA" bench stat --dir "$MNT" --files "$FILES" --keep --clients "$k" --label "$name-warm" --json
    "$IMCA" bench stat --dir "$MNT" --files "$FILES" --keep --clients "$k" --cold --label "$name-cold" --json
  done
  # B2: block sizes (the cache's); no cache once
  if [ "$name" = nocache ]; then
    "$IMCA" bench latency --dir "$MNT" --max 65536 --read-passes 3 --direct --label "$name" --json
  elif [ "$name" = imca-1node ]; then
    for bs in 256 2048 8192 131072; do
      ctl block-size "$bs"; sleep 1.5
      "$IMCA" bench latency --dir "$MNT" --max 65536 --read-passes 3 --direct --label "$name-bs$bs" --json
    done
  fi
  down
done
