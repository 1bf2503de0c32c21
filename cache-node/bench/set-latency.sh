#!/usr/bin/env bash
# Set latency under memory pressure (issue 14): memcached, this tree's cache
# node and (BEFORE=path) another cache-node build, alternated, a fresh
# server per cell, memcaslap's own set latency histogram.
#   cache-node/bench/set-latency.sh            (from the repo root)
# Cells:
#   readall  -m $READALL_M [64]: fill with 100 B items until the first eviction,
#            read every item once (all of them "read lately"), then the load:
#            the case where one store used to move the whole store (265 ms).
#   steady   -m $STEADY_M [8]: the load alone; memcaslap's window (16 x 10k
#            keys) does not fit, so every set evicts and the gets read items
#            near the tail.
# Load: memcaslap -T 2 -c $CONNS [16], 16 B keys, $SIZE [100] B values, 90 % get,
#   $DURATION [10] s. Knobs: PASSES [2], CELLS ["readall steady"],
#   NODE=path (else builds this tree's example), BEFORE=path (optional).
# Columns: sets, set avg/p99/p99.9/max in us (p99 and p99.9 are memcaslap's
#   power-of-two bucket bounds), get p99, get misses, evictions and
#   evicted_active during the load, others% = CPU used by neither the server
#   nor memcaslap (other people's work on this machine), load = 1-min loadavg.
set -euo pipefail
cd "$(dirname "$0")/../.."
PASSES="${PASSES:-2}"; DURATION="${DURATION:-10}"; CONNS="${CONNS:-16}"; SIZE="${SIZE:-100}"
READALL_M="${READALL_M:-64}"; STEADY_M="${STEADY_M:-8}"; CELLS="${CELLS:-readall steady}"
target="${CARGO_TARGET_DIR:-target}"
if [ -z "${NODE:-}" ]; then
  cargo build --release -p cache-node --example cache-node >&2
  NODE="$target/release/examples/cache-node"
fi
MEMASLAP=$(command -v memcaslap || command -v memaslap)
HZ=$(getconf CLK_TCK)
OUT=$(mktemp -d /tmp/set-latency.XXXXXX)
printf 'key\n16 16 1\nvalue\n%d %d 1\ncmd\n0 0.1\n1 0.9\n' "$SIZE" "$SIZE" >"$OUT/load.cfg"
PORT=21431
user=root; id memcache >/dev/null 2>&1 && user=memcache

busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
proc_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
child_ticks() { tail -1 "$1" | awk -v hz="$HZ" '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%d", t * hz }'; }
wait_up() { for _ in $(seq 1 200); do memcping --servers="$1" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }

# stats NAME... of the server on $PORT, one value per line (0 if absent)
stats() {
  python3 - "$PORT" "$@" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"stats\r\n"); d = b""
while not d.endswith(b"END\r\n"): d += s.recv(65536)
st = dict(l.split()[1:3] for l in d.decode().splitlines() if l.startswith("STAT "))
print(" ".join(st.get(k, "0") for k in sys.argv[2:]))
EOF
}

# Fills the server on $PORT with SIZE-byte items until it evicts, then reads
# every item once (multi-gets of 100 keys). Prints items held.
prime() {
  python3 - "$PORT" "$SIZE" <<'EOF'
import socket, sys
port, size = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port)); v = b"v" * size
def stats():
    s.sendall(b"stats\r\n"); d = b""
    while not d.endswith(b"END\r\n"): d += s.recv(65536)
    return dict(l.split()[1:3] for l in d.decode().splitlines() if l.startswith("STAT "))
n = 0
while int(stats()["evictions"]) == 0:
    s.sendall(b"".join(b"set fill:%d 0 0 %d noreply\r\n%s\r\n" % (n + i, size, v) for i in range(2000)))
    n += 2000
hits = 0
for b in range(0, n, 100):
    s.sendall(b"get " + b" ".join(b"fill:%d" % i for i in range(b, min(n, b + 100))) + b"\r\n")
    d = b""
    while not d.endswith(b"END\r\n"): d += s.recv(1 << 20)
    hits += d.count(b"VALUE ")
print(hits)
EOF
}

cell() { # $1 cell, $2 server name, $3 command...
  local c=$1 name=$2; shift 2
  "$@" >"$OUT/$name.log" 2>&1 & local pid=$!
  wait_up "127.0.0.1:$PORT"
  local held=-
  [ "$c" = readall ] && held=$(prime)
  read -r e0 a0 < <(stats evictions evicted_active)
  local raw="$OUT/$c-$name-$pass.out"
  times >"$OUT/.t0"; local w0 b0 s0; w0=$(date +%s.%N); b0=$(busy_ticks); s0=$(proc_ticks "$pid")
  "$MEMASLAP" -s "127.0.0.1:$PORT" -F "$OUT/load.cfg" -T 2 -c "$CONNS" -t "${DURATION}s" -S "${DURATION}s" >"$raw" 2>&1 || true
  times >"$OUT/.t1"; local w1 b1 s1; w1=$(date +%s.%N); b1=$(busy_ticks); s1=$(proc_ticks "$pid")
  read -r e1 a1 < <(stats evictions evicted_active)
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  # memcaslap's CPU: the children's line of `times` around the run
  local cl cl0; cl=$(child_ticks "$OUT/.t1"); cl0=$(child_ticks "$OUT/.t0")
  awk -v c="$c" -v name="$name" -v held="$held" -v ev=$((e1 - e0)) -v act=$((a1 - a0)) -v load="$load" \
      -v srv=$((s1 - s0)) -v b=$((b1 - b0)) -v cl=$((cl - cl0)) -v hz="$HZ" -v n="$(nproc)" \
      -v secs="$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')" '
    function pct(h, hi, tot, q,   acc, i) { acc = 0; for (i = 0; i <= hi; i++) { acc += h[i]; if (acc >= q * tot) return 2 ^ i } return -1 }
    /^Get Statistics \(/ { sec = "g"; next } /^Set Statistics \(/ { sec = "s"; next } /^Total Statistics \(/ { sec = ""; next }
    sec == "s" && /^ +Max:/ { smax = $2 } sec == "s" && /^ +Avg:/ { savg = $2 }
    sec != "" && /^ +[0-9]+:/ { k = $1; sub(":", "", k); for (i = 2; i <= NF; i++) { j = k + i - 2
        if (sec == "s") { hs[j] = $i; ts += $i; if (j > his) his = j } else { hg[j] = $i; tg += $i; if (j > hig) hig = j } } }
    /^get_misses:/ { m = $2 }
    END {
      oth = 100 * (b - srv - cl) / (hz * secs * n); if (oth < 0) oth = 0
      printf "%-8s %-10s %8s %8d %7d %7d %8d %9d %7d %9d %9d %8d %7.0f %5s\n", c, name, held, ts, savg, pct(hs, his, ts, 0.99),
        pct(hs, his, ts, 0.999), smax, pct(hg, hig, tg, 0.99), m, ev, act, oth, load
    }' "$raw"
}

servers="memcached after"; [ -n "${BEFORE:-}" ] && servers="memcached before after"
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) node=$NODE before=${BEFORE:-} $(nproc) CPUs; raw: $OUT"
printf '%-8s %-10s %8s %8s %7s %7s %8s %9s %7s %9s %9s %8s %7s %5s\n' cell server held sets 'avg_us' 'p99_le' 'p999_le' 'max_us' 'get_p99' misses evictions ev_active others% load
for pass in $(seq 1 "$PASSES"); do
  for c in $CELLS; do
    m=$READALL_M; [ "$c" = steady ] && m=$STEADY_M
    flags="-m $m -t 2 -c 4096 -U 0"
    order=$servers; [ $((pass % 2)) = 0 ] && order=$(echo "$servers" | tr ' ' '\n' | tac | tr '\n' ' ')
    for s in $order; do
      # shellcheck disable=SC2086
      case $s in
        memcached) cell "$c" memcached /usr/bin/memcached -u "$user" -l 127.0.0.1 -p "$PORT" $flags ;;
        before) cell "$c" before "$BEFORE" -l 127.0.0.1 -p "$PORT" $flags ;;
        after) cell "$c" after "$NODE" -l 127.0.0.1 -p "$PORT" $flags ;;
      esac
    done
  done
done
