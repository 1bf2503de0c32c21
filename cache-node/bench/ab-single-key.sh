#!/usr/bin/env bash
# A/B of running memcached-compatible servers under one single-key load, in
# turn, the order rotated by one per round (issue 14, docs/benchmarks/archive/cache-node-vs-memcached.md).
#   cache-node/bench/ab-single-key.sh NAME:PID:PORT ...      (servers already up, loopback)
# Knobs: SIZE [2048] value bytes; CONNS [16]; ROUNDS [3]; GET_RATIO [0.9].
# Per server and round: memaslap (2 threads, 16 B keys) for 11 s, measured over
# the 6 s from 3 s in. Per op, in µs: the server's CPU from
# /proc/PID/task/*/schedstat, its user/system split from the threads' stat
# ticks, voluntary and involuntary context switches; memaslap's CPU and
# voluntary switches; oth% = CPU used by neither, as % of all CPUs (load from
# other work: trust ratios only between lines with similar oth%).
set -euo pipefail
SIZE="${SIZE:-2048}"; CONNS="${CONNS:-16}"; ROUNDS="${ROUNDS:-3}"; GET_RATIO="${GET_RATIO:-0.9}"
MEMASLAP=$(command -v memcaslap || command -v memaslap)
OUT=$(mktemp -d /tmp/ab-single-key.XXXXXX)
printf 'key\n16 16 1\nvalue\n%d %d 1\ncmd\n0 %s\n1 %s\n' "$SIZE" "$SIZE" \
  "$(awk -v g="$GET_RATIO" 'BEGIN { printf "%.3f", 1 - g }')" "$GET_RATIO" >"$OUT/load.cfg"
threads=2; [ "$CONNS" -lt 2 ] && threads=$CONNS

# schedstat ns, voluntary and involuntary switches, utime and stime ticks, summed over threads
snap() {
  local run=0 vol=0 inv=0 ut=0 st=0 t r v i f
  for t in /proc/"$1"/task/*; do
    read -r r _ _ <"$t/schedstat"; run=$((run + r))
    v=$(awk '/^voluntary_ctxt/ { print $2 }' "$t/status"); i=$(awk '/^nonvoluntary_ctxt/ { print $2 }' "$t/status")
    vol=$((vol + v)); inv=$((inv + i))
    read -r -a f <<<"$(sed 's/.*) //' "$t/stat")"; ut=$((ut + f[11])); st=$((st + f[12]))
  done
  echo "$run $vol $inv $ut $st"
}
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# $1 name, $2 server pid, $3 port
one() {
  "$MEMASLAP" -s "127.0.0.1:$3" -F "$OUT/load.cfg" -T "$threads" -c "$CONNS" -t 11s -S 11s >"$OUT/$1-$r.out" 2>&1 &
  local m=$!
  sleep 3
  local s0 m0 w0 b0 s1 m1 w1 b1
  s0=$(snap "$2"); m0=$(snap "$m"); w0=$(date +%s.%N); b0=$(busy)
  sleep 6
  s1=$(snap "$2"); m1=$(snap "$m"); w1=$(date +%s.%N); b1=$(busy)
  wait "$m" || true
  local tps
  tps=$(awk '/^Run time:/ { for (i = 1; i <= NF; i++) if ($i == "TPS:") print $(i + 1) }' "$OUT/$1-$r.out")
  awk -v a="$s0" -v b="$s1" -v ma="$m0" -v mb="$m1" -v w0="$w0" -v w1="$w1" -v b0="$b0" -v b1="$b1" \
      -v tps="${tps:-0}" -v name="$1" -v r="$r" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" 'BEGIN {
    split(a, x); split(b, y); split(ma, p); split(mb, q); secs = w1 - w0; ops = tps * secs
    if (ops == 0) { printf "%-10s %2d no ops\n", name, r; exit }
    printf "%-10s %2d %8d %7.2f %6.2f %6.2f %6.3f %6.3f %7.2f %6.3f %5.0f\n", name, r, tps,
      (y[1] - x[1]) / 1000 / ops, (y[4] - x[4]) / hz * 1e6 / ops, (y[5] - x[5]) / hz * 1e6 / ops,
      (y[2] - x[2]) / ops, (y[3] - x[3]) / ops, (q[1] - p[1]) / 1000 / ops, (q[2] - p[2]) / ops,
      100 * ((b1 - b0) / hz - (y[1] - x[1]) / 1e9 - (q[1] - p[1]) / 1e9) / (n * secs) }'
}

echo "# value $SIZE B, $CONNS connections, get ratio $GET_RATIO; $(uptime)"
printf '%-10s %2s %8s %7s %6s %6s %6s %6s %7s %6s %5s\n' server rd 'ops/s' 'srv_us' user sys vcs ivcs 'cli_us' 'cli_vcs' 'oth%'
n=$#
for r in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    k=$(((i + r - 1) % n + 1))
    IFS=: read -r name pid port <<<"${!k}"
    one "$name" "$pid" "$port"
  done
done
echo "# $(uptime); raw memaslap outputs: $OUT"
