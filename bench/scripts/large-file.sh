#!/usr/bin/env bash
# A large file written once and read cold, with and without the bank (issue 34: "sequential
# write and first cold read with the bank ≥ 1.0× without it"), in ONE run: for each binary
# given, `imca up --cache-mb 1024` (2 cache nodes) and `imca up --no-cache`; each round, per
# cluster: MB MiB written with 1 MiB writes (dd, then fsync), every page cache dropped, read
# once (the first cold read: nothing of it in the bank yet), dropped again, read again (the
# bank now holds it, if it fits). Prints MB/s, one JSON line per cluster and round.
#
# usage (root): bench/scripts/large-file.sh BIN [BIN...]
# knobs: MB (1024), ROUNDS (3), W (work dir, a mktemp under /var/tmp)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
MB=${MB:-1024} ROUNDS=${ROUNDS:-3}
W=${W:-$(mktemp -d /var/tmp/imca-large.XXXXXX)}
PIDS=()
. "$(dirname "$0")/clusters.sh"
cleanup() { set +e; stop_all; rm -rf "$W"; }
trap cleanup EXIT
up() { # up NAME BIN [flags]: mounted at $W/NAME-mnt
    local name=$1 bin=$2; shift 2
    start_up "$bin" "$W/$name" "$W/$name-mnt" "$@"
}
mbps() { # dd's rate in MB/s, whatever unit it printed
    dd "$@" bs=1M 2>&1 | tail -1 | awk '{v=$(NF-1); u=$NF; if (u ~ /^GB/) v*=1000; if (u ~ /^kB/) v/=1000; print v}'
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
TARGETS=()
i=0
for bin in "$@"; do
    up "bank$i" "$bin" --cache-mb 1024; TARGETS+=("bank$i")
    up "nobank$i" "$bin" --no-cache; TARGETS+=("nobank$i")
    echo "# bank$i, nobank$i: $bin"
    i=$((i + 1))
done
echo "# $(date -u +%FT%TZ) MB=$MB; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do
        f=$W/$t-mnt/big$r
        drop
        w=$(mbps if=/dev/zero of="$f" count="$MB" conv=fsync)
        drop
        r1=$(mbps if="$f" of=/dev/null)
        drop
        r2=$(mbps if="$f" of=/dev/null)
        rm -f "$f"
        echo "{\"target\": \"$t\", \"round\": $r, \"mb\": $MB, \"write_mbps\": $w, \"cold_read_mbps\": $r1, \"second_cold_read_mbps\": $r2}"
    done
done
