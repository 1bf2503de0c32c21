#!/usr/bin/env bash
# A first stat pass through a client that has seen none of the files (issue
# 12's "stat/s, first pass"), in ONE run: N files of 1 KiB made through one
# client, then stat'ed by name (a scrambled order, as `find`/`du`/a build
# scan would, no listing first) through a second client of the same volume,
# twice (first pass / second pass), for
#   local          the same directory again (one kernel: nothing is cold but the path)
#   bindfs         a second bindfs mount of it (a fresh FUSE mount: the FUSE ceiling)
#   glusterfs      a second mount of Debian's GlusterFS volume (GLUSTER=1)
#   imca           `imca up --no-cache`; the second client is a second gateway,
#                  with stat-ahead off (--stat-ahead 0) and on (the default)
#   imca+bank      `imca up` (2 cache nodes), the same two second gateways
#
# usage (root; bindfs, python3): cargo build --release -p imca
#        bench/scripts/stat-ahead.sh [target/release/imca]
# knobs: N (files, 2000), W (work dir, a mktemp under /var/tmp)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
export N=${N:-2000}
W=${W:-$(mktemp -d /var/tmp/imca-sa.XXXXXX)}
UP="" G2=""
cleanup() {
    set +e
    [ -n "$G2" ] && { kill -INT "$G2"; wait "$G2"; }
    [ -n "$UP" ] && { kill -INT "$UP"; wait "$UP"; }
    for m in "$W/bindfs" "$W/bindfs2"; do fusermount3 -u -z "$m" 2>/dev/null; done
    [ -n "${GLUSTER:-}" ] && umount -l "$W/gfs2" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT

make_files() { # make_files DIR
    python3 - "$1" <<'PY'
import os, sys
d = os.path.join(sys.argv[1], "sa")
os.makedirs(d, exist_ok=True)
for i in range(int(os.environ["N"])):
    with open(os.path.join(d, f"f{i:05d}"), "wb") as h:
        h.write(os.urandom(1024))
PY
}

passes() { # passes DIR LABEL: one JSON line, the stat rates of two passes
    python3 - "$1" "$2" <<'PY'
import json, os, sys, time
d, label, n = sys.argv[1], sys.argv[2], int(os.environ["N"])
order = [os.path.join(d, "sa", f"f{(k * 7919) % n:05d}") for k in range(n)]
def rate():
    t = time.perf_counter()
    for f in order: os.stat(f)
    return round(n / (time.perf_counter() - t))
s1 = rate(); s2 = rate()
print(json.dumps({"target": label, "first_pass_stat_per_s": s1, "second_pass_stat_per_s": s2}))
PY
}

up() { # up NAME [flags]: a fresh cluster mounted at $W/NAME-mnt
    local name=$1; shift
    "$BIN" up --dir "$W/$name" --mount "$W/$name-mnt" "$@" >"$W/$name.out" 2>&1 & UP=$!
    for _ in $(seq 1200); do [ -f "$W/$name/cluster.json" ] && return 0; sleep 0.1; done
    cat "$W/$name.out" >&2; echo "imca up $name did not come up" >&2; exit 1
}
down() { kill -INT "$UP"; wait "$UP" || true; UP=""; }

second_gateway() { # second_gateway NAME LABEL [mount flags]: mount, measure, unmount
    local name=$1 label=$2; shift 2
    local ss; ss=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["storage_servers"]))' "$W/$name/cluster.json")
    mkdir -p "$W/g2-mnt"; rm -f "$W/g2.ready"
    "$BIN" mount --storage-servers "$ss" --secret-file "$W/$name/volume.secret" --ready-file "$W/g2.ready" "$@" "$W/g2-mnt" 2>"$W/g2.log" & G2=$!
    for _ in $(seq 600); do [ -f "$W/g2.ready" ] && break; sleep 0.1; done
    [ -f "$W/g2.ready" ] || { cat "$W/g2.log" >&2; exit 1; }
    passes "$W/g2-mnt" "$label"
    kill -INT "$G2"; wait "$G2" || true; G2=""
}

imca() { # imca NAME LABEL [up flags]
    local name=$1 label=$2; shift 2
    up "$name" "$@"
    make_files "$W/$name-mnt"
    sleep 2   # the first gateway's TTLs ran out (as for the peers below)
    second_gateway "$name" "$label, stat-ahead off" --stat-ahead 0
    second_gateway "$name" "$label" 
    down
}

echo "# $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) N=$N; $(bindfs --version | head -1); $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$W/local" "$W/bindfs" "$W/bindfs2"
make_files "$W/local"
passes "$W/local" local
bindfs "$W/local" "$W/bindfs2"
passes "$W/bindfs2" "bindfs (a fresh mount)"
fusermount3 -u "$W/bindfs2"
if [ -n "${GLUSTER:-}" ]; then
    # Debian's GlusterFS 10.3 with its defaults (2 bricks, loopback), set up
    # by ../shared/peers/glusterfs-baseline.sh (PEERS=its directory); the
    # files are made through its mount, stat'ed through a second one.
    GB=${PEERS:-../shared/peers}/glusterfs-baseline.sh
    bash "$GB" setup >&2; bash "$GB" perf default >&2
    GFS=${GFS_MNT:-/tmp/gfs-mnt}
    rm -rf "$GFS/sa"; make_files "$GFS"
    mkdir -p "$W/gfs2"; mount -t glusterfs "$(findmnt -n -o SOURCE "$GFS")" "$W/gfs2"
    sleep 2
    passes "$W/gfs2" "glusterfs (defaults), a second mount"
    umount "$W/gfs2"; rm -rf "$GFS/sa"
fi
imca imca imca --no-cache
imca imcab imca+bank
