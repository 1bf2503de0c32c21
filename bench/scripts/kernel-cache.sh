#!/usr/bin/env bash
# What coherent kernel caching buys (issue 12), in ONE run: the issue's table
# (N files of 1 KiB: stat first pass / second pass, open+read+close, warm
# 1-byte pread) for
#   local          a directory on the same disk (the kernel ceiling)
#   bindfs         Debian's FUSE passthrough of it (the FUSE ceiling)
#   imca           `imca up --no-cache` (2 storage servers, kernel cache on: the default)
#   imca, 5 s lease  the same with `--kernel-lease 5`
#   imca+bank      `imca up` (2 storage servers + 2 cache nodes, kernel cache on)
#   imca-off       `imca up --no-cache --kernel-cache off` (the old TTL-0 gateway)
#   imca-off+bank  `imca up --kernel-cache off` (2 cache nodes)
# and what the coherence costs a writer: 4 KiB overwrites of one file (pwrite, µs each)
# through the gateway alone, then with a second gateway mounted that holds the
# file in its kernel (every write is called back to it before it is acknowledged).
# "first pass" stats run after a 2 s pause, when every lease and TTL has run out;
# the second pass (median of 5) is also run by 4 processes at once (disjoint
# quarters, median of 3). ROUNDS=k runs the whole list of targets k times, in
# turn, so each ratio can be read within one round.
# Also: warm 1 B and 2 KiB preads, and a warm sequential re-read of a 64 MiB file.
# GLUSTER=1 adds Debian's GlusterFS (defaults) via ../shared/peers/glusterfs-baseline.sh.
#
# usage (root; bindfs, python3): cargo build --release -p imca
#        bench/scripts/kernel-cache.sh [target/release/imca]
# knobs: N (files, 2000), PREADS (20000), WRITES (2000), ROUNDS (1), W (work dir, a mktemp under /var/tmp),
#        OLD=path/to/another/imca (also measures its imca and imca+bank in every round, labelled "old"),
#        QUICK=1 (only local, bindfs, imca, imca+bank, and no writer test: the reads' ceilings in a few minutes)
set -euo pipefail
BIN=$(realpath "${1:-target/release/imca}")
export N=${N:-2000} PREADS=${PREADS:-20000} WRITES=${WRITES:-2000}
W=${W:-$(mktemp -d /var/tmp/imca-kc.XXXXXX)}
UP="" G2=""
cleanup() {
    set +e
    [ -n "$G2" ] && { kill -INT "$G2"; wait "$G2"; }
    [ -n "$UP" ] && { kill -INT "$UP"; wait "$UP"; }
    for b in "$W"/r*/bindfs; do fusermount3 -u -z "$b" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT

up() { # up NAME [flags]: a fresh cluster mounted at $W/NAME-mnt (binary: $UPBIN, else $BIN)
    local name=$1; shift
    "${UPBIN:-$BIN}" up --dir "$W/$name" --mount "$W/$name-mnt" "$@" >"$W/$name.out" 2>&1 & UP=$!
    for _ in $(seq 1200); do [ -f "$W/$name/cluster.json" ] && return 0; sleep 0.1; done
    cat "$W/$name.out" >&2; echo "imca up $name did not come up" >&2; exit 1
}
down() { kill -INT "$UP"; wait "$UP" || true; UP=""; }

measure() { # measure DIR LABEL: one JSON line
    python3 - "$1" "$2" <<'PY'
import json, os, sys, time
d, label = sys.argv[1], sys.argv[2]
n, preads = int(os.environ["N"]), int(os.environ["PREADS"])
os.makedirs(os.path.join(d, "kc"), exist_ok=True)
files = [os.path.join(d, "kc", f"f{i:05d}") for i in range(n)]
for f in files:
    with open(f, "wb") as h:
        h.write(os.urandom(1024))
with open(files[0], "ab") as h:   # room for the 2 KiB pread
    h.write(os.urandom(3072))
def rate(fn):
    t = time.perf_counter(); fn(); return round(n / (time.perf_counter() - t))
def stat_all():
    for f in files: os.stat(f)
def read_all():
    for f in files:
        fd = os.open(f, os.O_RDONLY); os.read(fd, 4096); os.close(fd)
time.sleep(2)   # every lease and TTL has run out: a first pass
def stat_4p():
    # four processes over disjoint quarters, at once
    pids = []
    for q in range(4):
        pid = os.fork()
        if pid == 0:
            for f in files[q::4]: os.stat(f)
            os._exit(0)
        pids.append(pid)
    for pid in pids: os.waitpid(pid, 0)
# A second pass takes a few ms: the median of 5 (3 with 4 processes), all
# well within the lease, so one preemption does not decide the number.
def median(xs): return sorted(xs)[len(xs) // 2]
s1 = rate(stat_all); s2 = median([rate(stat_all) for _ in range(5)])
s2_4 = median([rate(stat_4p) for _ in range(3)]); orc = rate(read_all)
def pread_us(size):
    fd = os.open(files[0], os.O_RDONLY); os.pread(fd, size, 0)
    t = time.perf_counter()
    for _ in range(preads): os.pread(fd, size, 0)
    us = (time.perf_counter() - t) / preads * 1e6
    os.close(fd)
    return round(us, 2)
big = os.path.join(d, "kc", "big")
with open(big, "wb") as h:
    for _ in range(64): h.write(os.urandom(1 << 20))
def seq_mb_s():
    # the second read of a 64 MiB file: from the page cache where one is kept
    t = time.perf_counter()
    with open(big, "rb", buffering=0) as h:
        while h.read(1 << 20): pass
    return round(64 / (time.perf_counter() - t))
seq_mb_s()
print(json.dumps({"target": label, "stat_per_s": [s1, s2], "stat_2nd_4p_per_s": s2_4, "open_read_close_per_s": orc,
                  "pread_1B_us": pread_us(1), "pread_2KiB_us": pread_us(2048), "seq_reread_MB_s": seq_mb_s()}))
PY
}

writes() { # writes FILE LABEL: µs per 4 KiB pwrite (64 offsets in turn)
    python3 - "$1" "$2" <<'PY'
import json, os, sys, time
f, label, n = sys.argv[1], sys.argv[2], int(os.environ["WRITES"])
fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)
buf = os.urandom(4096)
os.pwrite(fd, buf, 0)
t = time.perf_counter()
for i in range(n): os.pwrite(fd, buf, (i % 64) * 4096)
us = (time.perf_counter() - t) / n * 1e6
os.close(fd)
print(json.dumps({"target": label, "pwrite_4k_us": round(us, 1)}))
PY
}

echo "# $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) N=$N PREADS=$PREADS WRITES=$WRITES; $(bindfs --version | head -1); $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
one_round() { # one_round R: every target once, in turn (dirs under $W/rR)
    mkdir -p "$W/r$1/local" "$W/r$1/bindfs"
    measure "$W/r$1/local" local
    bindfs "$W/r$1/local" "$W/r$1/bindfs"
    measure "$W/r$1/bindfs" bindfs
    fusermount3 -u "$W/r$1/bindfs"
    if [ -n "${GLUSTER:-}" ]; then
        # Debian's GlusterFS 10.3 with its defaults (2 bricks, loopback), set up
        # by ../shared/peers/glusterfs-baseline.sh (PEERS=its directory).
        GB=${PEERS:-../shared/peers}/glusterfs-baseline.sh
        bash "$GB" setup >&2; bash "$GB" perf default >&2
        measure "${GFS_MNT:-/tmp/gfs-mnt}" "glusterfs (defaults)"
        rm -rf "${GFS_MNT:-/tmp/gfs-mnt}/kc"
    fi

    up r$1/imca --no-cache;                          measure "$W/r$1/imca-mnt" imca;                 down
    up r$1/imcab;                                    measure "$W/r$1/imcab-mnt" imca+bank;           down
    if [ -n "${OLD:-}" ]; then
        UPBIN=$(realpath "$OLD")
        up r$1/old --no-cache;                       measure "$W/r$1/old-mnt" "imca (old)";          down
        up r$1/oldb;                                 measure "$W/r$1/oldb-mnt" "imca+bank (old)";    down
        UPBIN=""
    fi
    [ -n "${QUICK:-}" ] && return 0
    up r$1/imca5 --no-cache --kernel-lease 5;        measure "$W/r$1/imca5-mnt" "imca, 5 s lease";   down
    up r$1/imcaoff --no-cache --kernel-cache off;    measure "$W/r$1/imcaoff-mnt" imca-off;          down
    up r$1/imcaoffb --kernel-cache off;              measure "$W/r$1/imcaoffb-mnt" imca-off+bank;    down
}
for r in $(seq "${ROUNDS:-1}"); do
    [ "${ROUNDS:-1}" = 1 ] || echo "# round $r"
    one_round "$r"
done

[ -n "${QUICK:-}" ] && exit 0
# The writer's cost of coherence: alone, then with a second gateway holding the file.
up imcaw --no-cache
writes "$W/imcaw-mnt/w" "writer alone"
SS=$(python3 -c 'import json,sys; print(",".join(json.load(open(sys.argv[1]))["storage_servers"]))' "$W/imcaw/cluster.json")
mkdir -p "$W/g2-mnt"
"$BIN" mount --storage-servers "$SS" --secret-file "$W/imcaw/volume.secret" --ready-file "$W/g2.ready" "$W/g2-mnt" 2>"$W/g2.log" & G2=$!
for _ in $(seq 600); do [ -f "$W/g2.ready" ] && break; sleep 0.1; done
cat "$W/g2-mnt/w" >/dev/null; stat "$W/g2-mnt/w" >/dev/null   # gateway 2's kernel holds it
writes "$W/imcaw-mnt/w" "writer, 2nd gateway holding the file"
kill -INT "$G2"; wait "$G2" || true; G2=""
down
