#!/usr/bin/env bash
# Server CPU and instructions per key under pipelined multi-key reads of
# three forms (text `get k1 … kN`, N meta `mg`, N binary GETKQ), for
# comparing cache-node builds with each other and with memcached (issue 14).
# Servers alternate within each pass (their order rotating), same flags.
#   cache-node/bench/pipeline.sh NAME=BINARY ...       (from the repo root)
#   e.g. before=/tmp/cn-base after=target/release/examples/cache-node memcached=/usr/bin/memcached
# Knobs: PASSES [3]; SECS [6] per cell; FORMS ["get mg getkq"]; DEPTHS ["16 64"];
#   CONNS [16]; KEYS [200000] keys of SIZE [2048] bytes; FLAGS ["-m 1024 -t 2 -c 4096 -U 0"]
# Columns: keys/s (client), srv_us/key = server user+system CPU per key
# (/proc/PID/stat over the run), instr/key = server instructions per key
# (perf stat -p, user and kernel; "-" where the machine has no hardware
# counters, as in a VM that answers "<not supported>"). Record `uptime` with the results: other
# load shows in keys/s, less in the per-key columns.
set -euo pipefail
cd "$(dirname "$0")/../.."
PASSES="${PASSES:-3}"; SECS="${SECS:-6}"; FORMS="${FORMS:-get mg getkq}"; DEPTHS="${DEPTHS:-16 64}"
CONNS="${CONNS:-16}"; KEYS="${KEYS:-200000}"; SIZE="${SIZE:-2048}"; FLAGS="${FLAGS:--m 1024 -t 2 -c 4096 -U 0}"
target="${CARGO_TARGET_DIR:-target}"
LOAD="${LOAD:-}"
if [ -z "$LOAD" ]; then
  cargo build --release -p cache-node --example pipeline-load >&2
  LOAD="$target/release/examples/pipeline-load"
fi
PORT="${PORT:-21391}"; HZ=$(getconf CLK_TCK)
proc_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
user=(); [ "$(id -u)" = 0 ] && user=(-u root)
servers=("$@")
printf '%-10s %-6s %5s %5s %10s %10s %10s\n' server form depth pass keys/s srv_us/key instr/key
for pass in $(seq 1 "$PASSES"); do
  n=${#servers[@]}
  for r in $(seq 0 $((n - 1))); do
    spec=${servers[$(( (r + pass - 1) % n ))]}; name=${spec%%=*}; bin=${spec#*=}
    # shellcheck disable=SC2086
    "$bin" "${user[@]}" -l 127.0.0.1 -p "$PORT" $FLAGS & pid=$!
    until "$LOAD" "127.0.0.1:$PORT" get 1 1 0 1 1 0 >/dev/null 2>&1; do :; done  # connect retry: ready
    "$LOAD" "127.0.0.1:$PORT" get 1 1 0 "$KEYS" "$SIZE" 1 >/dev/null
    for form in $FORMS; do
      for d in $DEPTHS; do
        s0=$(proc_ticks $pid)
        perf stat -x, -e instructions -p "$pid" -o /tmp/pipeline-perf.$$ -- sleep "$SECS" & perf=$!
        out=$("$LOAD" "127.0.0.1:$PORT" "$form" "$d" "$CONNS" "$SECS" "$KEYS" "$SIZE" 0)
        wait $perf
        s1=$(proc_ticks $pid)
        keys=$(echo "$out" | awk '{ print $1 }'); rate=$(echo "$out" | awk '{ print $(NF-1) }')
        ins=$(awk -F, '/instructions/ { print $1 }' /tmp/pipeline-perf.$$)
        awk -v name="$name" -v form="$form" -v d="$d" -v p="$pass" -v k="$keys" -v r="$rate" -v srv=$((s1 - s0)) \
            -v hz="$HZ" -v ins="$ins" '
          BEGIN { i = ins + 0 > 0 ? sprintf("%10.0f", ins / k) : sprintf("%10s", "-")
                  printf "%-10s %-6s %5d %5d %10.0f %10.3f %s\n", name, form, d, p, r, srv / hz * 1e6 / k, i }'
      done
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
rm -f /tmp/pipeline-perf.$$
