#!/usr/bin/env bash
# Metadata rate (issue 11, part 5), in ONE run: untar a real source tree (Rust crate
# sources from this machine's cargo registry: many small files in deep directories) and
# `rm -rf` it, on
#   local          a directory on the same disk (the kernel ceiling)
#   bindfs         Debian's FUSE passthrough of it (the FUSE ceiling)
#   glusterfs      Debian's GlusterFS 10.3, defaults, 2 bricks on loopback (GLUSTER=1;
#                  set up by ../shared/peers/glusterfs-baseline.sh)
#   imca           `imca up --no-cache` (2 storage servers; kernel cache on: the default)
#   imca+bank      `imca up` (2 storage servers + 2 cache nodes)
# each ROUNDS times in turn (targets alternated, so load drifts hit all alike); prints one
# JSON line per target and round: entries, seconds and entries/s for untar and for rm -rf,
# and `tar --compare` of the tree against the tarball (an untar that lost or broke a file
# is not a result; whether mtimes were kept is reported apart).
#
# usage (root; bindfs): cargo build --release -p imca
#        GLUSTER=1 bench/scripts/untar.sh [target/release/imca]
# knobs: ENTRIES (about how many entries the tarball has, 4000), ROUNDS (2),
#        W (work dir, a mktemp under /var/tmp), PEERS (../shared/peers),
#        FRESH_FS (1: every target's files on an ext4 of its own, made for this run;
#        0: all in W on the host's file system)
#
# Why a file system per target: ext4 skips inodes freed in the last minute when it
# allocates new ones (`recently_deleted`), and a scan past tens of thousands of them
# costs more CPU than the rest of a create. With every target on one file system, each
# target's untar paid for the `rm -rf` of the ones before it (measured: up to 12 % of
# all CPU in `find_inode_bit`), so the order of the targets decided the result.
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
ENTRIES=${ENTRIES:-4000} ROUNDS=${ROUNDS:-2}
W=${W:-$(mktemp -d /var/tmp/imca-untar.XXXXXX)}
PIDS=()
FRESH_FS=${FRESH_FS:-1}
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill -INT "$p"; wait "$p"; done
    fusermount3 -u -z "$W/bindfs" 2>/dev/null
    [ -n "${GB:-}" ] && [ "$FRESH_FS" = 1 ] && PURGE=1 GFS_ROOT="$W/fs-gluster/gfs" bash "$GB" teardown >/dev/null 2>&1
    for f in "$W"/fs-*; do mountpoint -q "$f" && umount "$f"; done
    rm -rf "$W"
}
trap cleanup EXIT

# The tarball: whole crates from the registry, in name order, until ENTRIES entries.
REG=$(ls -d "$HOME"/.cargo/registry/src/*/ | head -1)
[ -d "$REG" ] || { echo "untar.sh: no cargo registry sources under ~/.cargo/registry/src" >&2; exit 1; }
python3 - "$REG" "$ENTRIES" > "$W/crates" <<'PY'
import os, sys
reg, want = sys.argv[1], int(sys.argv[2])
n = 0
for c in sorted(os.listdir(reg)):
    if n >= want:
        break
    print(c)
    n += 1 + sum(len(d) + len(f) for _, d, f in os.walk(os.path.join(reg, c)))
PY
tar -C "$REG" -cf "$W/tree.tar" -T "$W/crates"
N=$(tar -tf "$W/tree.tar" | wc -l)
MB=$(( $(stat -c %s "$W/tree.tar") >> 20 ))

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

up() { # up NAME [flags]: a cluster mounted at $W/NAME-mnt; prints its mount
    local name=$1; shift
    "$BIN" up --dir "$(fs "$name")/cluster" --mount "$W/$name-mnt" "$@" >"$W/$name.out" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 1200); do [ -f "$W/fs-$name/cluster/cluster.json" ] && return 0; sleep 0.1; done
    cat "$W/$name.out" >&2; echo "untar.sh: imca up $name did not come up" >&2; exit 1
}

measure() { # measure DIR LABEL ROUND: one JSON line
    local d=$1/untar label=$2 round=$3 t0 t1 t2 ok
    mkdir -p "$d"
    sync
    t0=$(date +%s.%N)
    tar -C "$d" -xf "$W/tree.tar"
    t1=$(date +%s.%N)
    # names, types, sizes and contents must match; mtimes are reported apart
    # (bindfs does not keep them)
    tar -C "$d" --compare -f "$W/tree.tar" >"$W/compare.err" 2>&1 || true
    if grep -qv "Mod time differs" "$W/compare.err"; then ok=false; else ok=true; fi
    if grep -q "Mod time differs" "$W/compare.err"; then mt=false; else mt=true; fi
    t2=$(date +%s.%N)
    rm -rf "$d"
    local t3; t3=$(date +%s.%N)
    python3 -c 'import json,sys; n,t0,t1,t2,t3=int(sys.argv[3]),*map(float,sys.argv[4:8]); print(json.dumps({"target":sys.argv[1],"round":int(sys.argv[2]),"entries":n,"untar_s":round(t1-t0,2),"untar_per_s":round(n/(t1-t0)),"rm_rf_s":round(t3-t2,2),"rm_rf_per_s":round(n/(t3-t2)),"identical":sys.argv[8]=="true","mtimes_kept":sys.argv[9]=="true"}))' \
        "$label" "$round" "$N" "$t0" "$t1" "$t2" "$t3" "$ok" "$mt"
    [ "$ok" = true ] || { echo "untar.sh: $label: the untarred tree differs from the tarball:" >&2; head -5 "$W/compare.err" >&2; }
}

echo "# $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) tarball: $N entries, $MB MiB, $(wc -l < "$W/crates") crates; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg); FRESH_FS=$FRESH_FS"
LOCAL=$(fs local)/local
mkdir -p "$LOCAL" "$W/bindfs"
bindfs "$LOCAL" "$W/bindfs"
TARGETS=("$LOCAL=local" "$W/bindfs=bindfs")
if [ -n "${GLUSTER:-}" ]; then
    GB=${PEERS:-$(dirname "$0")/../../../shared/peers}/glusterfs-baseline.sh
    if [ "$FRESH_FS" = 1 ]; then
        # the volume again, its bricks on a file system of their own
        PURGE=1 bash "$GB" teardown >&2
        # (teardown signals glusterd without waiting; setup would find it still there)
        for _ in $(seq 100); do
            [ -f /run/glusterd.pid ] && kill -0 "$(cat /run/glusterd.pid)" 2>/dev/null || break
            sleep 0.1
        done
        export GFS_ROOT; GFS_ROOT=$(fs gluster)/gfs
    fi
    bash "$GB" setup >&2; bash "$GB" perf default >&2
    TARGETS+=("${GFS_MNT:-/tmp/gfs-mnt}=glusterfs")
fi
up imca --no-cache; TARGETS+=("$W/imca-mnt=imca")
up imcab;           TARGETS+=("$W/imcab-mnt=imca+bank")
for r in $(seq "$ROUNDS"); do
    for t in "${TARGETS[@]}"; do measure "${t%%=*}" "${t#*=}" "$r"; done
done
