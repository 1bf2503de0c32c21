#!/usr/bin/env bash
# Sequential 1 MiB writes and reads through the gateway with the kernel cache off (every
# byte crosses FUSE and the network), to check what the gateway's thread model costs
# large transfers (docs/benchmarks/archive/issue-12-kernel-caching.md, "The hand-offs removed"): one 256 MiB file written
# with fsync, read twice, then two files read at once.
# usage (root): cargo build --release -p imca; bench/scripts/seq-rw.sh target/release/imca
# knobs: WORKERS (the gateway's runtime threads, `imca mount --workers`; default: its own),
#        MB (file size, 256), W (work dir)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}"); MB=${MB:-256}
W=${W:-$(mktemp -d /var/tmp/imca-seq.XXXXXX)}
[ -n "${WORKERS:-}" ] && export IMCA_WORKERS=$WORKERS
"$BIN" up --dir "$W/c" --mount "$W/m" --kernel-cache off > "$W/up.log" 2>&1 & UP=$!
trap 'kill -INT $UP; wait $UP; rm -rf "$W"' EXIT
for _ in $(seq 300); do [ -f "$W/c/cluster.json" ] && break; sleep 0.1; done
[ -f "$W/c/cluster.json" ] || { echo "imca up did not come up: $W/up.log" >&2; exit 1; }
# dd's own rate, with its unit ("373 MB/s", "1.2 GB/s")
rate() { dd "$@" bs=1M 2>&1 | tail -1 | awk '{print "\"" $(NF-1) " " $NF "\""}'; }
w=$(rate if=/dev/zero of="$W/m/a" count="$MB" conv=fsync)
dd if=/dev/zero of="$W/m/b" bs=1M count="$MB" conv=fsync 2>/dev/null
r1=$(rate if="$W/m/a" of=/dev/null)
r2=$(rate if="$W/m/a" of=/dev/null)
t=$(date +%s.%N)
dd if="$W/m/a" of=/dev/null bs=1M 2>/dev/null & D=$!
dd if="$W/m/b" of=/dev/null bs=1M 2>/dev/null
wait $D
both=$(python3 -c "import time; print(round(2 * $MB / (time.time() - $t)))")
echo "{\"workers\": \"${WORKERS:-default}\", \"write\": $w, \"read\": [$r1, $r2], \"two_readers_MB_s\": $both}"
