#!/usr/bin/env bash
# Cache node vs Debian memcached, alternating the two with the same flags and
# the same load generator (memcaslap via ../shared/peers/memcached-baseline.sh).
#   cache-node/bench/vs-memcached.sh            (from the repo root)
# Knobs: PASSES [2] alternations; DURATION [8] s per cell; FLAGS ["-m 1024 -t 2 -c 4096 -U 0"]
set -euo pipefail
cd "$(dirname "$0")/../.."
PASSES="${PASSES:-2}"; export DURATION="${DURATION:-8}" RUNS=1 SKIP_CAPABLE=1
FLAGS="${FLAGS:--m 1024 -t 2 -c 4096 -U 0}"
BASELINE="${BASELINE:-../shared/peers/memcached-baseline.sh}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p cache-node --example cache-node >&2
NODE="$target/release/examples/cache-node"
PORT="${NODE_PORT:-21311}"
for pass in $(seq 1 "$PASSES"); do
  echo "### pass $pass: memcached $FLAGS"
  MC_ARGS="$FLAGS" PORT=21211 "$BASELINE"
  # shellcheck disable=SC2086
  "$NODE" -l 127.0.0.1 -p "$PORT" $FLAGS & pid=$!
  echo "### pass $pass: imca cache-node $FLAGS (pid $pid)"
  TARGET_PID=$pid "$BASELINE" "127.0.0.1:$PORT" || true
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
