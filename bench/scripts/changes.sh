#!/usr/bin/env bash
# The change benchmark (issue 34) with its peers in the same run: `imca bench suite
# --only changes` (create+write 4 KiB, rename, unlink, mkdir, rmdir, untar of a real tree,
# rm -rf; ops/s per phase) over
#   local       a directory (the kernel ceiling)
#   bindfs      Debian's FUSE passthrough of another directory (the FUSE ceiling)
#   imca        `imca up --no-cache` (2 storage servers)
#   imca-bank   `imca up` (2 storage servers + its cache nodes)
# ROUNDS rounds, alternated between the targets (round 1 on each, then round 2 …); ratios
# against bindfs, the issue's yardstick. Writes OUT/report.md, OUT/changes.svg|png and each
# target's JSON and CSV.
#
# usage (root; bindfs): cargo build --release -p imca
#        bench/scripts/changes.sh [target/release/imca] [more `imca bench suite` flags]
#   e.g. bench/scripts/changes.sh target/release/imca --quick
# knobs: OLD (another imca binary, e.g. the build before a change: adds its imca-old and
#        imca-old-bank targets to the same run), ROUNDS (3), OUT (the report's directory, kept; default a new /var/tmp/imca-changes-*),
#        W (work dir, a mktemp under /var/tmp, removed), IMCA (0: local and bindfs only),
#        FRESH_FS (1: every target's files on an ext4 of its own, made for this run;
#        0: all in W on the host's file system)
#
# Why a file system per target (as untar.sh): ext4 skips inodes freed in the last minute
# when it allocates new ones (`recently_deleted`), so on one file system each target's
# untar would pay for the `rm -rf` of the targets before it, and the order of the targets
# would decide the result.
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}"); shift || true
ROUNDS=${ROUNDS:-3} IMCA=${IMCA:-1} FRESH_FS=${FRESH_FS:-1}
W=${W:-$(mktemp -d /var/tmp/imca-changes-work.XXXXXX)}
OUT=${OUT:-$(mktemp -d /var/tmp/imca-changes-$(date -u +%Y%m%dT%H%M%SZ).XXXX)}
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p"; done
    fusermount3 -u -z "$W/bindfs-mnt" 2>/dev/null || fusermount -u -z "$W/bindfs-mnt" 2>/dev/null
    for f in "$W"/fs-*; do mountpoint -q "$f" && umount "$f"; done
    rm -rf "$W"
}
trap cleanup EXIT

# fs NAME: a directory for target NAME's files (on an ext4 of its own with FRESH_FS=1)
fs() {
    local d=$W/fs-$1
    mkdir -p "$d"
    if [ "$FRESH_FS" = 1 ]; then
        truncate -s 8G "$W/$1.img"
        mkfs.ext4 -q -F "$W/$1.img"
        mount -o loop "$W/$1.img" "$d"
    fi
    echo "$d"
}

up() { # up NAME [flags]: a cluster mounted at $W/NAME-mnt, its files on fs NAME
    local name=$1 bin=$BIN; shift
    case $name in imca-old*) bin=$OLD ;; esac
    "$bin" up --dir "$(fs "$name")/cluster" --mount "$W/$name-mnt" "$@" >"$W/$name.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1200); do [ -f "$W/fs-$name/cluster/cluster.json" ] && return 0; sleep 0.1; done
    cat "$W/$name.out" >&2; echo "changes.sh: imca up $name did not come up" >&2; exit 1
}

LOCAL=$(fs local)/local
BSRC=$(fs bindfs)/src
mkdir -p "$LOCAL" "$BSRC" "$W/bindfs-mnt"
bindfs "$BSRC" "$W/bindfs-mnt"
TARGETS=(--target "local=$LOCAL" --target "bindfs=$W/bindfs-mnt")
if [ "$IMCA" = 1 ]; then
    up imca --no-cache
    TARGETS+=(--target "imca=$W/imca-mnt,cluster=$W/fs-imca/cluster/cluster.json")
    up imca-bank
    TARGETS+=(--target "imca-bank=$W/imca-bank-mnt,cluster=$W/fs-imca-bank/cluster/cluster.json")
    if [ -n "${OLD:-}" ]; then
        OLD=$(realpath "$OLD")
        up imca-old --no-cache
        TARGETS+=(--target "imca-old=$W/imca-old-mnt,cluster=$W/fs-imca-old/cluster/cluster.json")
        up imca-old-bank
        TARGETS+=(--target "imca-old-bank=$W/imca-old-bank-mnt,cluster=$W/fs-imca-old-bank/cluster/cluster.json")
    fi
fi
echo "# $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg); FRESH_FS=$FRESH_FS ROUNDS=$ROUNDS" >&2
"$BIN" bench suite --only changes --rounds "$ROUNDS" --baseline bindfs --out "$OUT" "${TARGETS[@]}" "$@"
