#!/usr/bin/env bash
# Cache node vs Debian memcached, alternating the two with the same flags and
# the same load generator (memcaslap via ../shared/peers/memcached-baseline.sh).
#   cache-node/bench/vs-memcached.sh            (from the repo root)
# Knobs: PASSES [2] alternations; DURATION [8] s per cell; FLAGS ["-m 1024 -t 2 -c 4096 -U 0"]
# Multi-get cells (the bank's pattern: one `get` line of 16-64 keys per request,
# memaslap -d), run in the same alternation after the mixed cells:
#   MGET_KEYS ["16 64"] keys per get; MGET_CONNS ["4 16"]; MGET_SIZE [2048] value bytes;
#   MGET=0 skips them; MIXED=0 skips the single-key cells of the baseline script.
# NODE=path runs that cache-node binary (e.g. a build of the code before a change)
#   instead of building this tree's.
# BEFORE=path adds that cache-node binary (the code before a change) as a
#   third server ("before"), in the same alternation: the order of the servers
#   rotates by one each pass (PASSES=3 puts each first once), in the single-key
#   cells too (without BEFORE those run memcached first, then ours).
set -euo pipefail
cd "$(dirname "$0")/../.."
PASSES="${PASSES:-2}"; export DURATION="${DURATION:-8}" RUNS=1 SKIP_CAPABLE=1
FLAGS="${FLAGS:--m 1024 -t 2 -c 4096 -U 0}"
BASELINE="${BASELINE:-../shared/peers/memcached-baseline.sh}"
MGET="${MGET:-1}"; MIXED="${MIXED:-1}"
MGET_KEYS="${MGET_KEYS:-16 64}"; MGET_CONNS="${MGET_CONNS:-4 16}"; MGET_SIZE="${MGET_SIZE:-2048}"
target="${CARGO_TARGET_DIR:-target}"
if [ -z "${NODE:-}" ]; then
  cargo build --release -p cache-node --example cache-node >&2
  NODE="$target/release/examples/cache-node"
fi
PORT="${NODE_PORT:-21311}"
MEMASLAP=$(command -v memcaslap || command -v memaslap)
HZ=$(getconf CLK_TCK)
OUT=$(mktemp -d /tmp/vs-memcached.XXXXXX)
printf 'key\n16 16 1\nvalue\n%d %d 1\ncmd\n0 0.1\n1 0.9\n' "$MGET_SIZE" "$MGET_SIZE" >"$OUT/mget.cfg"

busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
proc_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
child_ticks() { tail -1 "$1" | awk -v hz="$HZ" '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t * hz }'; }
wait_up() { for _ in $(seq 1 100); do memcping --servers="$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

# One server's multi-get cells: $1 name, $2 server pid, $3 host:port.
# keys/s = keys fetched per second; get p99 = per get request (memaslap's
# power-of-two bucket bound, us); srv_us/key = server CPU per key fetched or
# stored; others% = CPU used by neither server nor memaslap (load from others).
mget_cells() {
  for d in $MGET_KEYS; do
    for c in $MGET_CONNS; do
      t=2; [ "$t" -gt "$c" ] && t=$c
      raw="$OUT/$1-d$d-c$c-$pass.out"
      times >"$OUT/.t0"; w0=$(date +%s.%N); b0=$(busy_ticks); s0=$(proc_ticks "$2"); c0=$(child_ticks "$OUT/.t0")
      "$MEMASLAP" -s "$3" -F "$OUT/mget.cfg" -T "$t" -c "$c" -d "$d" -t "${DURATION}s" -S "${DURATION}s" >"$raw" 2>&1 || true
      times >"$OUT/.t1"; w1=$(date +%s.%N); b1=$(busy_ticks); s1=$(proc_ticks "$2"); c1=$(child_ticks "$OUT/.t1")
      awk -v name="$1" -v d="$d" -v c="$c" -v srv=$((s1 - s0)) -v b=$((b1 - b0)) -v cl=$((c1 - c0)) -v hz="$HZ" \
          -v n="$(nproc)" -v secs="$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')" '
        /^Get Statistics \(/ { sec = 1; next }
        /^(Set|Total) Statistics \(/ { sec = 0; next }
        sec && /^ +[0-9]+:/ { k = $1; sub(":", "", k); for (i = 2; i <= NF; i++) { h[k + i - 2] = $i; tot += $i; if (k + i - 2 > hi) hi = k + i - 2 } }
        /^cmd_get:/ { g = $2 } /^cmd_set:/ { s = $2 } /^get_misses:/ { m = $2 }
        /^Run time:/ { rt = $3; sub("s", "", rt) }
        END {
          acc = 0; p99 = -1; for (i = 0; i <= hi; i++) { acc += h[i]; if (acc >= 0.99 * tot) { p99 = 2 ^ i; break } }
          oth = 100 * (b - srv - cl) / (hz * secs * n); if (oth < 0) oth = 0
          printf "%-10s %4d %5d %10.0f %9.0f %8d %9.2f %7.0f %8d\n", name, d, c, g / rt, g / d / rt, p99, srv / hz * 1e6 / (g + s), oth, m
        }' "$raw"
    done
  done
}

# One server's single-key cells (the baseline script's): $1 memcached, imca or before.
mixed_cells() {
  case "$1" in
    memcached)
      echo "### pass $pass: memcached $FLAGS"
      MC_ARGS="$FLAGS" PORT=21211 "$BASELINE" ;;
    imca)
      echo "### pass $pass: imca cache-node $FLAGS (pid $pid)"
      TARGET_PID=$pid "$BASELINE" "127.0.0.1:$PORT" || true ;;
    before)
      # shellcheck disable=SC2086
      "$BEFORE" -l 127.0.0.1 -p $((PORT + 2)) $FLAGS & local b=$!
      wait_up "127.0.0.1:$((PORT + 2))"
      echo "### pass $pass: before ($BEFORE) $FLAGS (pid $b)"
      TARGET_PID=$b "$BASELINE" "127.0.0.1:$((PORT + 2))" || true
      kill "$b"; wait "$b" 2>/dev/null || true ;;
  esac
}

for pass in $(seq 1 "$PASSES"); do
  # shellcheck disable=SC2086
  "$NODE" -l 127.0.0.1 -p "$PORT" $FLAGS & pid=$!
  wait_up "127.0.0.1:$PORT"
  if [ "$MIXED" = 1 ]; then
    order=(memcached imca)
    [ -n "${BEFORE:-}" ] && order+=(before)
    n=${#order[@]}
    for i in $(seq 0 $((n - 1))); do
      if [ -n "${BEFORE:-}" ]; then mixed_cells "${order[$(((i + pass - 1) % n))]}"; else mixed_cells "${order[$i]}"; fi
    done
  fi
  if [ "$MGET" = 1 ]; then
    echo "### pass $pass: multi-get, value ${MGET_SIZE} B, get:set 0.9:0.1 requests, ${DURATION}s per cell"
    printf '%-10s %4s %5s %10s %9s %8s %9s %7s %8s\n' server keys conns 'keys/s' 'gets/s' 'p99_le' 'srv_us/key' others% misses
    user=root; id memcache >/dev/null 2>&1 && user=memcache
    # shellcheck disable=SC2086
    /usr/bin/memcached -u "$user" -l 127.0.0.1 -p 21212 $FLAGS & mpid=$!
    wait_up 127.0.0.1:21212; wait_up "127.0.0.1:$PORT"
    servers=("memcached $mpid 127.0.0.1:21212" "imca $pid 127.0.0.1:$PORT")
    if [ -n "${BEFORE:-}" ]; then
      # shellcheck disable=SC2086
      "$BEFORE" -l 127.0.0.1 -p $((PORT + 1)) $FLAGS & bpid=$!
      wait_up "127.0.0.1:$((PORT + 1))"
      servers+=("before $bpid 127.0.0.1:$((PORT + 1))")
    fi
    # the order changes between passes too (two servers: alternates)
    n=${#servers[@]}
    for i in $(seq 0 $((n - 1))); do
      # shellcheck disable=SC2086
      mget_cells ${servers[$(((i + pass - 1) % n))]}
    done
    kill "$mpid"; wait "$mpid" 2>/dev/null || true
    if [ -n "${BEFORE:-}" ]; then kill "$bpid"; wait "$bpid" 2>/dev/null || true; fi
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
echo "# raw memaslap outputs: $OUT"
